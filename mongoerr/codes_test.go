package mongoerr_test

import (
	"testing"

	"github.com/ferry-io/ferry/mongoerr"
)

func TestName(t *testing.T) {
	cases := []struct {
		code int32
		want string
	}{
		{mongoerr.CodeInternalError, "InternalError"},
		{mongoerr.CodeWriteConflict, "WriteConflict"},
		{mongoerr.CodeStaleShardVersion, "OBSOLETE_StaleShardVersion"},
		{mongoerr.CodeFailedToSatisfyReadPreference, "FailedToSatisfyReadPreference"},
		{mongoerr.CodeInterruptedDueToReplStateChange, "InterruptedDueToReplStateChange"},
		{mongoerr.CodeIDLFailedToParse, "IDLFailedToParse"},
		{mongoerr.CodeDuplicateKey, "DuplicateKey"},
		// Location codes: no name in error_codes.yml.
		{mongoerr.CodeNoPreImageID, "Location51770"},
		{mongoerr.CodeIDLUnknownField, "Location40415"},
		{17419, "Location17419"},
		{0, "Location0"},
	}
	for _, c := range cases {
		if got := mongoerr.Name(c.code); got != c.want {
			t.Errorf("Name(%d) = %q, want %q", c.code, got, c.want)
		}
	}
}
