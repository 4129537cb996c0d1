package mql

import "testing"

func TestExprMoreOperators(t *testing.T) {
	d := docA(t, `{"s": "  Hello World  ", "arr": [3, 1, 2], "dt": {"$date": "2021-03-04T05:06:07.089Z"},
		"people": [{"n": "b", "age": 30}, {"n": "a", "age": 25}], "o": {"x": 1, "y": 2}}`)
	cases := []struct{ expr, want string }{
		{`{"$sqrt": 16}`, `4.0`},
		{`{"$pow": [2, 10]}`, `1024`},
		{`{"$pow": [2, -1]}`, `0.5`},
		{`{"$pow": [2.0, 2]}`, `4.0`},
		{`{"$exp": 0}`, `1.0`},
		{`{"$ln": 1}`, `0.0`},
		{`{"$log10": 100}`, `2.0`},
		{`{"$log": [8, 2]}`, `3.0`},
		{`{"$round": 2.5}`, `2.0`},
		{`{"$round": 3.5}`, `4.0`},
		{`{"$round": [1234, -2]}`, `1200`},
		{`{"$round": [3.14159, 2]}`, `3.14`},
		{`{"$trunc": [3.789, 1]}`, `3.7`},
		{`{"$trunc": 7}`, `7`},
		{`{"$substr": ["abcdef", 1, 3]}`, `"bcd"`},
		{`{"$substrBytes": ["abc", 1, -1]}`, `"bc"`},
		{`{"$substrCP": ["héllo", 1, 3]}`, `"éll"`},
		{`{"$strLenCP": "héllo"}`, `5`},
		{`{"$strcasecmp": ["abc", "ABC"]}`, `0`},
		{`{"$strcasecmp": ["abd", "ABC"]}`, `1`},
		{`{"$indexOfBytes": ["hello", "l"]}`, `2`},
		{`{"$indexOfCP": ["héllo", "l"]}`, `2`},
		{`{"$indexOfBytes": ["hello", "z"]}`, `-1`},
		{`{"$trim": {"input": "$s"}}`, `"Hello World"`},
		{`{"$ltrim": {"input": "xxhixx", "chars": "x"}}`, `"hixx"`},
		{`{"$rtrim": {"input": "xxhixx", "chars": "x"}}`, `"xxhi"`},
		{`{"$regexMatch": {"input": "Hello", "regex": "^h", "options": "i"}}`, `true`},
		{`{"$regexFind": {"input": "a1b22", "regex": "([0-9]+)"}}`, `{"match": "1", "idx": 1, "captures": ["1"]}`},
		{`{"$regexFindAll": {"input": "a1b22", "regex": "[0-9]+"}}`, `[{"match": "1", "idx": 1, "captures": []}, {"match": "22", "idx": 3, "captures": []}]`},
		{`{"$regexFind": {"input": "abc", "regex": "z"}}`, `null`},
		{`{"$replaceOne": {"input": "a-b-c", "find": "-", "replacement": "+"}}`, `"a+b-c"`},
		{`{"$replaceAll": {"input": "a-b-c", "find": "-", "replacement": "+"}}`, `"a+b+c"`},
		{`{"$slice": ["$arr", 2]}`, `[3, 1]`},
		{`{"$slice": ["$arr", -1]}`, `[2]`},
		{`{"$slice": ["$arr", 1, 5]}`, `[1, 2]`},
		{`{"$indexOfArray": ["$arr", 2]}`, `2`},
		{`{"$range": [0, 10, 3]}`, `[0, 3, 6, 9]`},
		{`{"$range": [5, 0, -2]}`, `[5, 3, 1]`},
		{`{"$setUnion": [[1, 2], [2, 3]]}`, `[1, 2, 3]`},
		{`{"$setIntersection": [[1, 2, 3], [3, 2, 5]]}`, `[2, 3]`},
		{`{"$setDifference": [[1, 2, 3], [2]]}`, `[1, 3]`},
		{`{"$setEquals": [[1, 2], [2, 1, 1]]}`, `true`},
		{`{"$setIsSubset": [[1], [1, 2]]}`, `true`},
		{`{"$anyElementTrue": [[0, null, 1]]}`, `true`},
		{`{"$allElementsTrue": [[1, 0]]}`, `false`},
		{`{"$sortArray": {"input": "$arr", "sortBy": 1}}`, `[1, 2, 3]`},
		{`{"$sortArray": {"input": "$people", "sortBy": {"age": 1}}}`, `[{"n": "a", "age": 25}, {"n": "b", "age": 30}]`},
		{`{"$firstN": {"n": 2, "input": "$arr"}}`, `[3, 1]`},
		{`{"$lastN": {"n": 2, "input": "$arr"}}`, `[1, 2]`},
		{`{"$setField": {"field": "y", "input": "$o", "value": 5}}`, `{"x": 1, "y": 5}`},
		{`{"$setField": {"field": "z", "input": "$o", "value": 5}}`, `{"x": 1, "y": 2, "z": 5}`},
		{`{"$unsetField": {"field": "x", "input": "$o"}}`, `{"y": 2}`},
		{`{"$binarySize": "abc"}`, `3`},
		{`{"$bsonSize": {"a": 1}}`, `12`},
		{`{"$convert": {"input": "42", "to": "int"}}`, `42`},
		{`{"$convert": {"input": "x", "to": "int", "onError": "bad"}}`, `"bad"`},
		{`{"$convert": {"input": null, "to": "int", "onNull": 0}}`, `0`},
		{`{"$convert": {"input": 1, "to": "bool"}}`, `true`},
		{`{"$convert": {"input": 5, "to": 2}}`, `"5"`},
		{`{"$toObjectId": "5f0000000000000000000001"}`, `{"$oid": "5f0000000000000000000001"}`},
		{`{"$toDate": {"$numberLong": "0"}}`, `{"$date": "1970-01-01T00:00:00Z"}`},
		{`{"$toDate": "2021-03-04T05:06:07.089Z"}`, `{"$date": "2021-03-04T05:06:07.089Z"}`},
		{`{"$toDecimal": 5}`, `{"$numberDecimal": "5"}`},
		{`{"$year": "$dt"}`, `2021`},
		{`{"$month": "$dt"}`, `3`},
		{`{"$dayOfMonth": "$dt"}`, `4`},
		{`{"$hour": {"date": "$dt", "timezone": "+02:00"}}`, `7`},
		{`{"$millisecond": "$dt"}`, `89`},
		{`{"$dayOfWeek": "$dt"}`, `5`},
		{`{"$dayOfYear": "$dt"}`, `63`},
		{`{"$dateToString": {"date": "$dt"}}`, `"2021-03-04T05:06:07.089Z"`},
		{`{"$dateToString": {"date": "$dt", "format": "%Y/%m/%d %H:%M"}}`, `"2021/03/04 05:06"`},
		{`{"$dateToString": {"date": "$missing", "onNull": "none"}}`, `"none"`},
	}
	for _, c := range cases {
		e, err := CompileExpr(valA(t, c.expr))
		if err != nil {
			t.Errorf("CompileExpr(%s): %v", c.expr, err)
			continue
		}
		got, err := e.Eval(d, nil)
		if err != nil {
			t.Errorf("Eval(%s): %v", c.expr, err)
			continue
		}
		if want := valA(t, c.want); !identical(got, want) {
			t.Errorf("Eval(%s) = %s (%T), want %s (%T)", c.expr, describe(got), got, describe(want), want)
		}
	}
}
