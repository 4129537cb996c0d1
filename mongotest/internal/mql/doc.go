// Package mql implements MongoDB Query Language semantics over bson.D
// documents for the in-process emulator (mongotest): BSON comparison order,
// query filters, aggregation expressions, projections, sorts, update
// operators with their change-stream descriptions, and aggregation
// pipelines.
//
// # Guarantees
//
//   - Everything is compiled once (CompileFilter, CompileExpr,
//     CompileUpdate, CompilePipeline, CompileProjection, CompileSort) and the
//     compiled values are immutable and safe for concurrent use.
//   - Inputs are never modified: Apply, Run and ApplyOne return new
//     documents (unchanged sub-values may be shared with the input).
//   - Bad input never panics: compile and evaluation errors are *Error
//     values carrying MongoDB's code, codeName and message, so the server
//     can reply with them unchanged.
//   - Values are the types bson.Unmarshal produces into a bson.D (bson.D,
//     bson.A, int32, int64, float64, bson.Decimal128, ...); Go natives (int,
//     []any, maps, time.Time) in specifications are normalized the way the
//     driver encodes them.
//   - "missing" is distinct from null inside expressions (IsMissing) and
//     never appears in an output document.
//
// # Support
//
//	Area          Supported                                                Returns an *Error
//	------------  -------------------------------------------------------  ---------------------------------
//	Compare       full BSON order; numbers by value across int32/int64/     —
//	              double/decimal128; documents by type, name, value
//	Filters       $eq $ne $gt $gte $lt $lte $in $nin $and $or $nor $not     $where $text $near* $geo* (code 2,
//	              $exists $type (names, numbers, "number") $regex/$options  "not supported by mongotest"),
//	              and regex literals $size $all $elemMatch (both forms)     $jsonSchema; unknown operators
//	              $mod $bitsAll/AnySet/Clear $expr $comment $alwaysTrue/     (code 2 as MongoDB)
//	              False; dotted paths with implicit array traversal and
//	              numeric indexes; null matches missing
//	Expressions   field paths with array traversal, $$ROOT $$CURRENT $$NOW  unknown operator → 168
//	              $$CLUSTER_TIME $$REMOVE $$KEEP/$$PRUNE/$$DESCEND, user      InvalidPipelineOperator
//	              variables (Vars.User), $let $map $filter $reduce,
//	              arithmetic, comparison, boolean, string, array, set,
//	              conversion, date-part operators, $toHashedIndexKey;
//	              see OperatorNames; RegisterOperator adds more
//	Updates       $set $unset $inc $mul $rename $setOnInsert $push ($each    MongoDB's codes: 9 (parse), 14,
//	              $slice $sort $position) $pull (value, condition,          28 PathNotViable, 40 conflicts,
//	              document) $pullAll $addToSet ($each) $pop $currentDate     52, 54, 56, 66 ImmutableField
//	              (date/timestamp) $min $max $bit; positional "$"
//	              (ApplyForQuery / ApplyPositional), "$[]", "$[<id>]"
//	              with arrayFilters (CompileUpdateWithOptions);
//	              replacement documents; pipelines ($set/$addFields
//	              $project $unset $replaceRoot $replaceWith); UpsertSeed
//	Descriptions  updatedFields/removedFields/truncatedArrays/               —
//	              disambiguatedPaths derived from a $v:2 diff tree like
//	              the server (operator log for operator updates, the
//	              server's positional document diff with its size rules
//	              for pipelines), replacement detection, no-op detection
//	Pipelines     $match $project $addFields $set $unset $replaceRoot       $lookup $facet $out $merge
//	              $replaceWith $redact $sort $limit $skip $count $group      ($out/$merge: the server's job)
//	                                                                         $bucket $sample ... (code 2,
//	              ($sum $avg $min $max $first $last $push $addToSet $count   "not supported by mongotest");
//	              $mergeObjects $stdDevPop $stdDevSamp) $unwind            unknown stage → 40324
//	              $sortByCount
//	Projections   inclusion/exclusion/_id rules, nested and dotted paths,    positional "a.$", $meta
//	              computed fields, $slice, $elemMatch (find)
//	Sorts         ascending/descending, arrays by min/max element, empty     {$meta: ...}
//	              arrays before null, missing as null
//
// Collations (ParseCollation, Vars.Collation, Sort.WithCollation) follow
// the Unicode Collation Algorithm with CLDR tailorings (golang.org/x/text):
// locale, strength 1 to 3 and numericOrdering; the other options refuse
// with NotImplemented (238). Filters, sorts, comparison expressions, $in,
// update operators and $group keys honour a collation; expression
// operators and accumulators that compare values but do not implement one
// fail with 238 under a non-simple collation rather than compare bytewise.
//
// Regular expressions ($regex, regex literals, $regexMatch/$regexFind/
// $regexFindAll) run on Go's RE2 engine with the options i, m, s, x and u;
// PCRE-only constructs (look-around, back-references, possessive
// quantifiers) fail with error 51091 like an invalid pattern.
//
// Filter.Match treats an $expr evaluation error as "no match";
// Filter.MatchErr returns the error so that the server can fail the
// command as MongoDB does. Comparisons to null follow MongoDB 8.0: null
// matches null and missing, not undefined.
package mql
