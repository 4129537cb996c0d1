package mongoerr

import "strconv"

// Server error codes, named as in MongoDB's src/mongo/base/error_codes.yml.
// The list holds every named code Ferry decides on or the emulator
// (mongotest) replies with; Name gives each one's codeName.
//
// A code without a name there is an assertion's location id: a server
// replies with it under the codeName "Location<code>" (Name does the same),
// and Ferry writes such codes as numbers where they are raised, except the
// few below the table that more than one package uses.
const (
	CodeInternalError                      = 1
	CodeBadValue                           = 2
	CodeHostUnreachable                    = 6
	CodeHostNotFound                       = 7
	CodeFailedToParse                      = 9
	CodeUserNotFound                       = 11
	CodeUnauthorized                       = 13
	CodeTypeMismatch                       = 14
	CodeProtocolError                      = 17
	CodeOverflow                           = 15
	CodeAuthenticationFailed               = 18
	CodeIllegalOperation                   = 20
	CodeLockTimeout                        = 24
	CodeNamespaceNotFound                  = 26
	CodeIndexNotFound                      = 27
	CodePathNotViable                      = 28
	CodeConflictingUpdateOperators         = 40
	CodeCursorNotFound                     = 43
	CodeNoMatchingDocument                 = 47
	CodeNamespaceExists                    = 48
	CodeMaxTimeMSExpired                   = 50
	CodeDollarPrefixedFieldName            = 52
	CodeNotSingleValueField                = 54
	CodeEmptyFieldName                     = 56
	CodeCommandNotFound                    = 59
	CodeStaleShardVersion                  = 63 // OBSOLETE_StaleShardVersion
	CodeWriteConcernTimeout                = 64
	CodeImmutableField                     = 66
	CodeInvalidOptions                     = 72
	CodeInvalidNamespace                   = 73
	CodeUnknownReplWriteConcern            = 79
	CodeIndexOptionsConflict               = 85
	CodeIndexKeySpecsConflict              = 86
	CodeNetworkTimeout                     = 89
	CodeShutdownInProgress                 = 91
	CodeOperationFailed                    = 96
	CodeUnsatisfiableWriteConcern          = 100
	CodeWriteConflict                      = 112
	CodeDocumentValidationFailure          = 121
	CodeFailedToSatisfyReadPreference      = 133
	CodeReadConcernMajorityNotAvailableYet = 134
	CodeCappedPositionLost                 = 136
	CodeStaleEpoch                         = 150
	CodeViewDepthLimitExceeded             = 165
	CodeCommandNotSupportedOnView          = 166
	CodeInvalidPipelineOperator            = 168
	CodePrimarySteppedDown                 = 189
	CodeInvalidIndexSpecificationOption    = 197
	CodeInvalidUUID                        = 207
	CodeElectionInProgress                 = 216
	CodeIncompleteTransactionHistory       = 217
	CodeTransactionTooOld                  = 225
	CodeRetryChangeStream                  = 234
	CodeCursorKilled                       = 237
	CodeNotImplemented                     = 238
	CodeSnapshotTooOld                     = 239
	CodeConversionFailure                  = 241
	CodeSnapshotUnavailable                = 246
	CodeStaleDbVersion                     = 249
	CodeStaleChunkHistory                  = 250
	CodeNoSuchTransaction                  = 251
	CodeTransactionCommitted               = 256
	CodeInvalidResumeToken                 = 260
	CodeExceededTimeLimit                  = 262
	CodeOperationNotSupportedInTransaction = 263
	CodePreparedTransactionInProgress      = 267
	CodeMigrationConflict                  = 272
	CodeMechanismUnavailable               = 334
	CodeShardCannotRefreshDueToLocksHeld   = 343
	CodeChangeStreamFatalError             = 280
	CodeChangeStreamHistoryLost            = 286
	CodeNoQueryExecutionPlans              = 291
	CodeUnsupportedOpQueryCommand          = 352
	CodeInternalTransactionNotSupported    = 358
	CodeConnectionError                    = 384
	CodeResourceExhausted                  = 402
	CodeSocketException                    = 9001
	CodeNotWritablePrimary                 = 10107
	CodeBSONObjectTooLarge                 = 10334
	CodeDuplicateKey                       = 11000
	CodeInterruptedAtShutdown              = 11600
	CodeInterrupted                        = 11601
	CodeInterruptedDueToReplStateChange    = 11602
	CodeMergeStageNoMatchingDocument       = 13113
	CodeStaleConfig                        = 13388
	CodeNotPrimaryNoSecondaryOk            = 13435
	CodeNotPrimaryOrSecondary              = 13436
	CodeIDLFailedToParse                   = 40414
	// CodeIDLUnknownField is an unknown field in a command. The emulator
	// replies with the codeName Location40415 (error_codes.yml on
	// MongoDB's master names it IDLUnknownField), so Name gives that.
	CodeIDLUnknownField           = 40415
	CodeNotARetryableWriteCommand = 50768
)

// Location codes (no name in error_codes.yml) that more than one package
// raises or decides on.
const (
	// CodeChangeStreamNotFirstStage: $changeStream is not the pipeline's
	// first stage (Location40602).
	CodeChangeStreamNotFirstStage = 40602
	// CodeNoPreImageID: a change stream that requires pre-images met an
	// event without one (Location51770).
	CodeNoPreImageID = 51770
)

// names holds the codeName of every named code above.
var names = map[int32]string{
	CodeInternalError:                      "InternalError",
	CodeBadValue:                           "BadValue",
	CodeHostUnreachable:                    "HostUnreachable",
	CodeHostNotFound:                       "HostNotFound",
	CodeFailedToParse:                      "FailedToParse",
	CodeUserNotFound:                       "UserNotFound",
	CodeUnauthorized:                       "Unauthorized",
	CodeTypeMismatch:                       "TypeMismatch",
	CodeProtocolError:                      "ProtocolError",
	CodeOverflow:                           "Overflow",
	CodeAuthenticationFailed:               "AuthenticationFailed",
	CodeIllegalOperation:                   "IllegalOperation",
	CodeLockTimeout:                        "LockTimeout",
	CodeNamespaceNotFound:                  "NamespaceNotFound",
	CodeIndexNotFound:                      "IndexNotFound",
	CodePathNotViable:                      "PathNotViable",
	CodeConflictingUpdateOperators:         "ConflictingUpdateOperators",
	CodeCursorNotFound:                     "CursorNotFound",
	CodeNoMatchingDocument:                 "NoMatchingDocument",
	CodeNamespaceExists:                    "NamespaceExists",
	CodeMaxTimeMSExpired:                   "MaxTimeMSExpired",
	CodeDollarPrefixedFieldName:            "DollarPrefixedFieldName",
	CodeNotSingleValueField:                "NotSingleValueField",
	CodeEmptyFieldName:                     "EmptyFieldName",
	CodeCommandNotFound:                    "CommandNotFound",
	CodeStaleShardVersion:                  "OBSOLETE_StaleShardVersion",
	CodeWriteConcernTimeout:                "WriteConcernTimeout",
	CodeImmutableField:                     "ImmutableField",
	CodeInvalidOptions:                     "InvalidOptions",
	CodeInvalidNamespace:                   "InvalidNamespace",
	CodeUnknownReplWriteConcern:            "UnknownReplWriteConcern",
	CodeIndexOptionsConflict:               "IndexOptionsConflict",
	CodeIndexKeySpecsConflict:              "IndexKeySpecsConflict",
	CodeNetworkTimeout:                     "NetworkTimeout",
	CodeShutdownInProgress:                 "ShutdownInProgress",
	CodeOperationFailed:                    "OperationFailed",
	CodeUnsatisfiableWriteConcern:          "UnsatisfiableWriteConcern",
	CodeWriteConflict:                      "WriteConflict",
	CodeDocumentValidationFailure:          "DocumentValidationFailure",
	CodeFailedToSatisfyReadPreference:      "FailedToSatisfyReadPreference",
	CodeReadConcernMajorityNotAvailableYet: "ReadConcernMajorityNotAvailableYet",
	CodeCappedPositionLost:                 "CappedPositionLost",
	CodeStaleEpoch:                         "StaleEpoch",
	CodeViewDepthLimitExceeded:             "ViewDepthLimitExceeded",
	CodeCommandNotSupportedOnView:          "CommandNotSupportedOnView",
	CodeInvalidPipelineOperator:            "InvalidPipelineOperator",
	CodePrimarySteppedDown:                 "PrimarySteppedDown",
	CodeInvalidIndexSpecificationOption:    "InvalidIndexSpecificationOption",
	CodeInvalidUUID:                        "InvalidUUID",
	CodeElectionInProgress:                 "ElectionInProgress",
	CodeIncompleteTransactionHistory:       "IncompleteTransactionHistory",
	CodeTransactionTooOld:                  "TransactionTooOld",
	CodeRetryChangeStream:                  "RetryChangeStream",
	CodeCursorKilled:                       "CursorKilled",
	CodeNotImplemented:                     "NotImplemented",
	CodeSnapshotTooOld:                     "SnapshotTooOld",
	CodeConversionFailure:                  "ConversionFailure",
	CodeSnapshotUnavailable:                "SnapshotUnavailable",
	CodeStaleDbVersion:                     "StaleDbVersion",
	CodeStaleChunkHistory:                  "StaleChunkHistory",
	CodeNoSuchTransaction:                  "NoSuchTransaction",
	CodeTransactionCommitted:               "TransactionCommitted",
	CodeInvalidResumeToken:                 "InvalidResumeToken",
	CodeExceededTimeLimit:                  "ExceededTimeLimit",
	CodeOperationNotSupportedInTransaction: "OperationNotSupportedInTransaction",
	CodePreparedTransactionInProgress:      "PreparedTransactionInProgress",
	CodeMigrationConflict:                  "MigrationConflict",
	CodeMechanismUnavailable:               "MechanismUnavailable",
	CodeShardCannotRefreshDueToLocksHeld:   "ShardCannotRefreshDueToLocksHeld",
	CodeChangeStreamFatalError:             "ChangeStreamFatalError",
	CodeChangeStreamHistoryLost:            "ChangeStreamHistoryLost",
	CodeNoQueryExecutionPlans:              "NoQueryExecutionPlans",
	CodeUnsupportedOpQueryCommand:          "UnsupportedOpQueryCommand",
	CodeInternalTransactionNotSupported:    "InternalTransactionNotSupported",
	CodeConnectionError:                    "ConnectionError",
	CodeResourceExhausted:                  "ResourceExhausted",
	CodeSocketException:                    "SocketException",
	CodeNotWritablePrimary:                 "NotWritablePrimary",
	CodeBSONObjectTooLarge:                 "BSONObjectTooLarge",
	CodeDuplicateKey:                       "DuplicateKey",
	CodeInterruptedAtShutdown:              "InterruptedAtShutdown",
	CodeInterrupted:                        "Interrupted",
	CodeInterruptedDueToReplStateChange:    "InterruptedDueToReplStateChange",
	CodeMergeStageNoMatchingDocument:       "MergeStageNoMatchingDocument",
	CodeStaleConfig:                        "StaleConfig",
	CodeNotPrimaryNoSecondaryOk:            "NotPrimaryNoSecondaryOk",
	CodeNotPrimaryOrSecondary:              "NotPrimaryOrSecondary",
	CodeIDLFailedToParse:                   "IDLFailedToParse",
	CodeNotARetryableWriteCommand:          "NotARetryableWriteCommand",
}

// Name returns the codeName a server puts beside code in an error reply:
// the code's name in error_codes.yml, or "Location<code>" for a code
// without one.
func Name(code int32) string {
	if n, ok := names[code]; ok {
		return n
	}
	return "Location" + strconv.Itoa(int(code))
}
