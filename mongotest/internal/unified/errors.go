package unified

import (
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// serverErrorDetails is what a server error carries: every code and code
// name found in it (command error, write errors, write concern error), its
// labels and the raw reply.
type serverErrorDetails struct {
	codes  []int64
	names  []string
	labels []string
	raw    bson.Raw
}

// errorDetails extracts the server-side part of err; ok is false for an
// error that did not come from a server reply.
func errorDetails(err error) (d serverErrorDetails, ok bool) {
	var ce mongo.CommandError
	var we mongo.WriteException
	var bwe mongo.BulkWriteException
	var cbe mongo.ClientBulkWriteException
	switch {
	case errors.As(err, &ce):
		d.codes = []int64{int64(ce.Code)}
		d.names = []string{ce.Name}
		d.labels = ce.Labels
		d.raw = ce.Raw
	case errors.As(err, &we):
		for _, w := range we.WriteErrors {
			d.codes = append(d.codes, int64(w.Code))
		}
		if wce := we.WriteConcernError; wce != nil {
			d.codes = append(d.codes, int64(wce.Code))
			d.names = append(d.names, wce.Name)
		}
		d.labels = we.Labels
		d.raw = we.Raw
	case errors.As(err, &bwe):
		for _, w := range bwe.WriteErrors {
			d.codes = append(d.codes, int64(w.Code))
		}
		if wce := bwe.WriteConcernError; wce != nil {
			d.codes = append(d.codes, int64(wce.Code))
			d.names = append(d.names, wce.Name)
		}
		d.labels = bwe.Labels
	case errors.As(err, &cbe):
		if te := cbe.WriteError; te != nil {
			d.codes = append(d.codes, int64(te.Code))
			d.raw = te.Raw
		}
		for _, w := range cbe.WriteErrors {
			d.codes = append(d.codes, int64(w.Code))
		}
		for _, wce := range cbe.WriteConcernErrors {
			d.codes = append(d.codes, int64(wce.Code))
			d.names = append(d.names, wce.Name)
		}
	default:
		return d, false
	}
	return d, true
}

// labelled is implemented by driver errors that carry error labels,
// client-side ones included (e.g. NetworkError).
type labelled interface {
	HasErrorLabel(string) bool
}

func hasLabel(err error, label string) bool {
	var l labelled
	return errors.As(err, &l) && l.HasErrorLabel(label)
}

// verifyError checks an operation's error against expectError.
func (tr *testRun) verifyError(x *ExpectedError, err error, res opResult) error {
	d, server := errorDetails(err)
	isNetwork := mongo.IsNetworkError(err)
	if x.IsClientError != nil {
		isClient := !server || isNetwork
		if *x.IsClientError != isClient {
			return fmt.Errorf("expectError.isClientError: expected %v, got %v for error %q", *x.IsClientError, isClient, shorten(err.Error()))
		}
	}
	if x.IsTimeoutError != nil && *x.IsTimeoutError != mongo.IsTimeout(err) {
		return fmt.Errorf("expectError.isTimeoutError: expected %v, got %v for error %q", *x.IsTimeoutError, !*x.IsTimeoutError, shorten(err.Error()))
	}
	if x.ErrorContains != nil && !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(*x.ErrorContains)) {
		return fmt.Errorf("expectError.errorContains: %q not in error %q", *x.ErrorContains, shorten(err.Error()))
	}
	if x.ErrorCode != nil {
		if !server {
			return fmt.Errorf("expectError.errorCode: expected server error code %d, got a client error %q", *x.ErrorCode, shorten(err.Error()))
		}
		found := false
		for _, c := range d.codes {
			found = found || c == *x.ErrorCode
		}
		if !found {
			return fmt.Errorf("expectError.errorCode: expected %d, got %v (error %q)", *x.ErrorCode, d.codes, shorten(err.Error()))
		}
	}
	if x.ErrorCodeName != nil {
		if !server {
			return fmt.Errorf("expectError.errorCodeName: expected %s, got a client error %q", *x.ErrorCodeName, shorten(err.Error()))
		}
		found := false
		for _, n := range d.names {
			found = found || strings.EqualFold(n, *x.ErrorCodeName)
		}
		if !found {
			return fmt.Errorf("expectError.errorCodeName: expected %s, got %v (error %q)", *x.ErrorCodeName, d.names, shorten(err.Error()))
		}
	}
	for _, l := range x.ErrorLabelsContain {
		if !hasLabel(err, l) {
			return fmt.Errorf("expectError.errorLabelsContain: label %s missing; labels %v (error %q)", l, d.labels, shorten(err.Error()))
		}
	}
	for _, l := range x.ErrorLabelsOmit {
		if hasLabel(err, l) {
			return fmt.Errorf("expectError.errorLabelsOmit: label %s present; labels %v (error %q)", l, d.labels, shorten(err.Error()))
		}
	}
	if x.ErrorResponse != nil {
		if d.raw == nil {
			return fmt.Errorf("expectError.errorResponse: the error has no server reply (error %q)", shorten(err.Error()))
		}
		if e := tr.match.match("errorResponse", docValue(x.ErrorResponse), docValue(d.raw), true, true); e != nil {
			return fmt.Errorf("expectError: %w", e)
		}
	}
	if x.ExpectResult != nil {
		if err := tr.verifyResult(*x.ExpectResult, res); err != nil {
			return fmt.Errorf("expectError.expectResult: %w", err)
		}
	}
	if x.WriteErrors != nil || x.WriteConcernErrors != nil {
		return tr.verifyBulkErrors(x, err)
	}
	return nil
}
