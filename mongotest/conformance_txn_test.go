package mongotest_test

// Known failures of the transactions, retryable-writes and sessions suites.
// Every one needs a CRUD feature that the crud suite's work adds (branch
// emu-crud): the unified runner's collection bulkWrite, clientBulkWrite
// and count operations and maxTimeMS argument, and the server's bulkWrite
// command and $out/$merge stages. The server side of these tests (retry
// recording, labels, fail points) is in place; once those features are
// merged the tests must pass and these entries go.

const (
	needsBulkWrite       = "needs the unified runner's collection bulkWrite operation (crud suite work, branch emu-crud)"
	needsClientBulkWrite = "needs the 8.0 bulkWrite command and the runner's clientBulkWrite operation (crud suite work, branch emu-crud)"
	needsCount           = "needs the unified runner's count operation (crud suite work, branch emu-crud)"
	needsMaxTimeMS       = "needs the unified runner's maxTimeMS argument (crud suite work, branch emu-crud)"
	needsOutMerge        = "needs the $out and $merge stages (crud suite work, branch emu-crud)"
)

// known builds a knownFailures map: every key with the same reason.
func known(reason string, keys ...string) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = reason
	}
	return m
}

func mergeKnown(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

var transactionsKnownFailures = mergeKnown(
	known(needsBulkWrite,
		"bulk.json/bulk",
		"transaction-options.json/client writeConcern ignored for bulk",
		"write-concern.json/unacknowledged write concern coll bulkWrite",
	),
	known(needsClientBulkWrite,
		"client-bulkWrite.json/client bulkWrite in a transaction",
		"client-bulkWrite.json/client writeConcern ignored for client bulkWrite in transaction",
		"client-bulkWrite.json/client bulkWrite with writeConcern in a transaction causes a transaction error",
	),
	known(needsCount, "count.json/count"),
	known(needsMaxTimeMS, "error-labels.json/do not add UnknownTransactionCommitResult label to MaxTimeMSExpired inside transactions"),
)

var retryableWritesKnownFailures = mergeKnown(
	known(needsOutMerge,
		"aggregate-out-merge.json/aggregate with $out does not set txnNumber",
		"aggregate-out-merge.json/aggregate with $merge does not set txnNumber",
	),
	known(needsBulkWrite,
		"bulkWrite-errorLabels.json/BulkWrite succeeds with RetryableWriteError from server",
		"bulkWrite-errorLabels.json/BulkWrite fails if server does not return RetryableWriteError",
		"bulkWrite-errorLabels.json/BulkWrite succeeds after PrimarySteppedDown",
		"bulkWrite-errorLabels.json/BulkWrite succeeds after WriteConcernError ShutdownInProgress",
		"bulkWrite-serverErrors.json/BulkWrite succeeds after retryable writeConcernError in first batch",
		"bulkWrite-serverErrors.json/BulkWrite fails with a RetryableWriteError label after two connection failures",
		"bulkWrite.json/First command is retried",
		"bulkWrite.json/All commands are retried",
		"bulkWrite.json/Both commands are retried after their first statement fails",
		"bulkWrite.json/Second command is retried after its second statement fails",
		"bulkWrite.json/BulkWrite with unordered execution",
		"bulkWrite.json/First insertOne is never committed",
		"bulkWrite.json/Second updateOne is never committed",
		"bulkWrite.json/Third updateOne is never committed",
		"bulkWrite.json/Single-document write following deleteMany is retried",
		"bulkWrite.json/Single-document write following updateMany is retried",
		"bulkWrite.json/collection bulkWrite with updateMany does not set txnNumber",
		"bulkWrite.json/collection bulkWrite with deleteMany does not set txnNumber",
	),
	known(needsClientBulkWrite,
		"client-bulkWrite-clientErrors.json/client bulkWrite with one network error succeeds after retry",
		"client-bulkWrite-clientErrors.json/client bulkWrite with two network errors fails after retry",
		"client-bulkWrite-serverErrors.json/client bulkWrite with no multi: true operations succeeds after retryable top-level error",
		"client-bulkWrite-serverErrors.json/client bulkWrite with multi: true operations fails after retryable top-level error",
		"client-bulkWrite-serverErrors.json/client bulkWrite with no multi: true operations succeeds after retryable writeConcernError",
		"client-bulkWrite-serverErrors.json/client bulkWrite with multi: true operations fails after retryable writeConcernError",
		"client-bulkWrite-serverErrors.json/client bulkWrite with retryWrites: false does not retry",
	),
)
