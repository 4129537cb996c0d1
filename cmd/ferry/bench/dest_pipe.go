package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"sync"
)

// pipeDest reads the stdout sink's lines from file descriptor 3, the read
// end of the pipe the daemon's standard output writes to, and counts them
// by the id each line starts with ({"id":"<event id>",…).
type pipeDest struct {
	f    *os.File
	done chan struct{}
	mu   sync.Mutex
	bad  int64 // lines without an id
	err  error
	c    *counter
}

func startPipe(_ context.Context, c *counter, _ *ready) (destination, error) {
	f := os.NewFile(3, "stdout-pipe")
	if f == nil {
		return nil, errors.New("no file descriptor 3: the stdout destination reads the sink's pipe there")
	}
	d := &pipeDest{f: f, done: make(chan struct{}), c: c}
	go d.read()
	return d, nil
}

var idPrefix = []byte(`{"id":"`)

func (d *pipeDest) read() {
	defer close(d.done)
	r := bufio.NewReaderSize(d.f, 1<<20)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: count it by its start, skip the rest.
			d.count(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && err != io.EOF {
				d.fail(err)
			}
			continue
		}
		if len(line) > 0 {
			d.count(line)
		}
		if err != nil {
			if err != io.EOF {
				d.fail(err)
			}
			return
		}
	}
}

func (d *pipeDest) count(line []byte) {
	rest, ok := bytes.CutPrefix(line, idPrefix)
	end := bytes.IndexByte(rest, '"')
	if !ok || end < 0 {
		d.mu.Lock()
		d.bad++
		d.mu.Unlock()
		return
	}
	d.c.add(string(rest[:end]))
}

func (d *pipeDest) fail(err error) {
	d.mu.Lock()
	d.err = err
	d.mu.Unlock()
}

func (d *pipeDest) counts(context.Context, bool) (counts, error) {
	total, distinct := d.c.get()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return counts{}, d.err
	}
	how := "lines read from the daemon's standard output (a pipe), distinct by their id"
	if d.bad > 0 {
		return counts{}, errors.New("lines without an event id on the daemon's standard output")
	}
	return counts{Delivered: total, Distinct: distinct, How: how}, nil
}

func (d *pipeDest) close() { _ = d.f.Close() }
