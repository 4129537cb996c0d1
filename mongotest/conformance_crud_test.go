package mongotest_test

// crudKnownFailures are the tests of the crud suite that fail against the
// emulator, each with why. Every one is a limitation of the Go driver that
// the runner goes through (the test asserts what a driver sends), not of
// the emulator; the Go driver skips the same tests in its own runner.
var crudKnownFailures = map[string]string{
	"bulkWrite-deleteMany-hint-unacknowledged.json/Unacknowledged deleteMany with hint document on 4.4+ server":     whyHintUnacknowledged,
	"bulkWrite-deleteMany-hint-unacknowledged.json/Unacknowledged deleteMany with hint string on 4.4+ server":       whyHintUnacknowledged,
	"bulkWrite-deleteOne-hint-unacknowledged.json/Unacknowledged deleteOne with hint document on 4.4+ server":       whyHintUnacknowledged,
	"bulkWrite-deleteOne-hint-unacknowledged.json/Unacknowledged deleteOne with hint string on 4.4+ server":         whyHintUnacknowledged,
	"bulkWrite-replaceOne-hint-unacknowledged.json/Unacknowledged replaceOne with hint document on 4.2+ server":     whyHintUnacknowledged,
	"bulkWrite-replaceOne-hint-unacknowledged.json/Unacknowledged replaceOne with hint string on 4.2+ server":       whyHintUnacknowledged,
	"bulkWrite-updateMany-hint-unacknowledged.json/Unacknowledged updateMany with hint document on 4.2+ server":     whyHintUnacknowledged,
	"bulkWrite-updateMany-hint-unacknowledged.json/Unacknowledged updateMany with hint string on 4.2+ server":       whyHintUnacknowledged,
	"bulkWrite-updateOne-hint-unacknowledged.json/Unacknowledged updateOne with hint document on 4.2+ server":       whyHintUnacknowledged,
	"bulkWrite-updateOne-hint-unacknowledged.json/Unacknowledged updateOne with hint string on 4.2+ server":         whyHintUnacknowledged,
	"deleteMany-hint-unacknowledged.json/Unacknowledged deleteMany with hint document on 4.4+ server":               whyHintUnacknowledged,
	"deleteMany-hint-unacknowledged.json/Unacknowledged deleteMany with hint string on 4.4+ server":                 whyHintUnacknowledged,
	"deleteOne-hint-unacknowledged.json/Unacknowledged deleteOne with hint document on 4.4+ server":                 whyHintUnacknowledged,
	"deleteOne-hint-unacknowledged.json/Unacknowledged deleteOne with hint string on 4.4+ server":                   whyHintUnacknowledged,
	"find.json/Find with batchSize equal to limit":                                                                  "the Go driver sends batchSize limit-1 for a find whose batchSize equals its limit (GODRIVER-3395)",
	"findOneAndDelete-hint-unacknowledged.json/Unacknowledged findOneAndDelete with hint document on 4.4+ server":   whyHintUnacknowledged,
	"findOneAndDelete-hint-unacknowledged.json/Unacknowledged findOneAndDelete with hint string on 4.4+ server":     whyHintUnacknowledged,
	"findOneAndReplace-hint-unacknowledged.json/Unacknowledged findOneAndReplace with hint document on 4.4+ server": whyHintUnacknowledged,
	"findOneAndReplace-hint-unacknowledged.json/Unacknowledged findOneAndReplace with hint string on 4.4+ server":   whyHintUnacknowledged,
	"findOneAndUpdate-hint-unacknowledged.json/Unacknowledged findOneAndUpdate with hint document on 4.4+ server":   whyHintUnacknowledged,
	"findOneAndUpdate-hint-unacknowledged.json/Unacknowledged findOneAndUpdate with hint string on 4.4+ server":     whyHintUnacknowledged,
	"replaceOne-hint-unacknowledged.json/Unacknowledged replaceOne with hint document on 4.2+ server":               whyHintUnacknowledged,
	"replaceOne-hint-unacknowledged.json/Unacknowledged replaceOne with hint string on 4.2+ server":                 whyHintUnacknowledged,
	"updateMany-hint-unacknowledged.json/Unacknowledged updateMany with hint document on 4.2+ server":               whyHintUnacknowledged,
	"updateMany-hint-unacknowledged.json/Unacknowledged updateMany with hint string on 4.2+ server":                 whyHintUnacknowledged,
	"updateOne-hint-unacknowledged.json/Unacknowledged updateOne with hint document on 4.2+ server":                 whyHintUnacknowledged,
	"updateOne-hint-unacknowledged.json/Unacknowledged updateOne with hint string on 4.2+ server":                   whyHintUnacknowledged,
}

// whyHintUnacknowledged: the test sends a hint with an unacknowledged
// (w: 0) write, which the Go driver refuses client-side (GODRIVER-2125).
const whyHintUnacknowledged = "the Go driver refuses a hint with an unacknowledged write client-side (GODRIVER-2125)"
