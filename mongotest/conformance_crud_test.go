package mongotest_test

// crudKnownFailures are the tests of the crud suite the emulator is known
// to fail, each with why.
var crudKnownFailures = map[string]string{}
