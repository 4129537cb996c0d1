package ferry

import (
	"errors"
	"fmt"

	"github.com/ferry-io/ferry/checkpoint"
	"github.com/ferry-io/ferry/internal/resumetoken"
	"github.com/ferry-io/ferry/mongoerr"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// A checkpoint that cannot be resumed from is ErrCorruptCheckpoint: its
// record cannot be decoded (Load), or the server refuses the resume token
// it holds as one it cannot decode. Either way retrying cannot help and
// nothing is resumed from it: the operator sets a position over it or
// deletes it. The messages name the record as its store does (the
// collection and _id for mongostore), never the token.

// corruptRecordError is the stop of a checkpoint record Load cannot decode.
func (c *Consumer) corruptRecordError(err error) error {
	detail := fmt.Sprintf("stream %q partition %d: %v", c.cfg.name, c.cfg.partition, err)
	var ce *checkpoint.CorruptError
	if errors.As(err, &ce) {
		detail = fmt.Sprintf("stream %q partition %d: %v", c.cfg.name, c.cfg.partition, ce)
	}
	return &stopError{kind: ErrCorruptCheckpoint, err: err, detail: detail, msg: "ferry: " + detail +
		"; nothing is resumed from it. Repair the record, or delete it to start the partition again from its start position"}
}

// tokenRefused reports whether err, the server's refusal to open the
// stream at pos, is about the resume token of the checkpoint Run loaded:
// pos resumes from that token, and the server raised a code it raises only
// for a token it cannot decode, or a parse error (FailedToParse,
// Overflow, InvalidUUID, BadValue) for a token Ferry's own decoder
// rejects too.
func (r *runner) tokenRefused(pos position, err error) bool {
	tok := r.loadedToken
	if tok == nil || !bytesEqual(pos.resumeAfter, tok) && !bytesEqual(pos.startAfter, tok) {
		return false
	}
	if mongoerr.IsBadResumeToken(err) {
		return true
	}
	var se mongo.ServerError
	if !errors.As(err, &se) || !se.HasErrorCode(mongoerr.CodeFailedToParse) && !se.HasErrorCode(mongoerr.CodeOverflow) &&
		!se.HasErrorCode(mongoerr.CodeInvalidUUID) && !se.HasErrorCode(mongoerr.CodeBadValue) {
		return false
	}
	_, perr := resumetoken.Parse(tok)
	return perr != nil
}

// refusedTokenError is the stop of a checkpoint whose token the server
// refused (tokenRefused).
func (r *runner) refusedTokenError(err error) error {
	cfg := &r.c.cfg
	ce := &checkpoint.CorruptError{Stream: cfg.name, Partition: cfg.partition,
		Record:  checkpoint.RecordName(cfg.store, cfg.name, cfg.partition),
		Problem: "the server cannot read the resume token it holds: " + RedactTokens(err.Error())}
	detail := fmt.Sprintf("stream %q partition %d: %v", cfg.name, cfg.partition, ce)
	return &stopError{kind: ErrCorruptCheckpoint, err: err, detail: detail, msg: "ferry: " + detail +
		"; nothing is resumed from it. Set the partition's position over it, or delete the record to start the partition " +
		"again from its start position"}
}
