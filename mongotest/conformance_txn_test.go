package mongotest_test

// Known failures of the transactions, transactions-convenient-api,
// retryable-writes and sessions suites, each with why. A listed test that
// passes fails TestConformance.

var transactionsKnownFailures = map[string]string{}

var retryableWritesKnownFailures = map[string]string{}
