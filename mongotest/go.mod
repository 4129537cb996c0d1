module github.com/ferry-io/ferry/mongotest

go 1.26.8

require (
	github.com/ferry-io/ferry v0.1.0
	github.com/xdg-go/scram v1.4.0
	go.mongodb.org/mongo-driver/v2 v2.10.0
	golang.org/x/text v0.43.0
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/xdg-go/stringprep v1.0.4 // indirect
	github.com/youmark/pkcs8 v0.0.0-20240726163527-a2c0da244d78 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
