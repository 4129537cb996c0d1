package mql

import (
	"math"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// formatDouble formats a double the way MongoDB's $toString does.
func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'g', 17, 64)
	// prefer the shortest representation that round-trips
	short := strconv.FormatFloat(f, 'g', -1, 64)
	if len(short) < len(s) {
		s = short
	}
	return s
}

// formatDate formats a date as ISO-8601 with milliseconds in UTC.
func formatDate(d bson.DateTime) string {
	t := time.UnixMilli(int64(d)).UTC()
	return t.Format("2006-01-02T15:04:05.000Z")
}
