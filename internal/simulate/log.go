package simulate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// MaxBadShare is the share of bad lines above which a log is refused: past it the format is
// most likely wrong, and a replay of the rest would mislead.
const MaxBadShare = 0.05

// maxLineBytes bounds one line; a longer one is a bad line.
const maxLineBytes = 1 << 20

// maxBadSamples is how many bad lines are kept with their reason.
const maxBadSamples = 20

// BadLine is a line that could not be read, with its 1-based number.
type BadLine struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// Log is an access log indexed in time order. Only the index is kept in memory (a few dozen
// bytes a line); lines are read again from the file when replayed.
type Log struct {
	Path   string
	Format Format
	// Lines counts the non-blank lines, Bad the ones that could not be read.
	Lines, Bad int
	// BadSamples are the first bad lines.
	BadSamples []BadLine
	// First and Last are the earliest and latest request times (Unix nanoseconds).
	First, Last int64

	file  *os.File
	index []indexed
}

type indexed struct {
	time   int64
	offset int64
	size   int32
	line   int32
}

// Open reads and checks every line of the log at path and sorts the requests by start time:
// Envoy writes a line when its request ends, so lines are out of start order by up to the
// longest request. Requests with the same start time keep their order in the file. It fails when
// the log has no request or more than MaxBadShare of its lines are bad (the error names the
// first bad lines). Close the Log when done.
func Open(path string, format Format) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	l := &Log{Path: path, Format: format, file: f}
	if err := l.scan(); err != nil {
		f.Close()
		return nil, err
	}
	if len(l.index) == 0 {
		f.Close()
		if l.Bad > 0 {
			return nil, fmt.Errorf("%s: no line is a %s request (%d bad); first: %s", path, format, l.Bad, l.badSummary())
		}
		return nil, fmt.Errorf("%s: no requests", path)
	}
	if share := float64(l.Bad) / float64(l.Lines); share > MaxBadShare {
		f.Close()
		return nil, fmt.Errorf("%s: %d of %d lines (%.1f %%) are not %s requests, more than %.0f %%: is --format right? first: %s",
			path, l.Bad, l.Lines, 100*share, format, 100*MaxBadShare, l.badSummary())
	}
	sort.SliceStable(l.index, func(i, j int) bool { return l.index[i].time < l.index[j].time })
	l.First, l.Last = l.index[0].time, l.index[len(l.index)-1].time
	return l, nil
}

func (l *Log) badSummary() string {
	var b bytes.Buffer
	for i, s := range l.BadSamples {
		if i == 3 {
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "line %d: %s", s.Line, s.Error)
	}
	return b.String()
}

func (l *Log) scan() error {
	r := bufio.NewReaderSize(l.file, 256<<10)
	var offset int64
	for number := 1; ; number++ {
		line, size, tooLong, err := readLine(r)
		if err == io.EOF && size == 0 {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s: line %d: %w", l.Path, number, err)
		}
		start := offset
		offset += int64(size)
		if len(bytes.TrimSpace(line)) == 0 && !tooLong {
			continue
		}
		l.Lines++
		if tooLong {
			l.bad(number, fmt.Sprintf("longer than %d bytes", maxLineBytes))
			continue
		}
		e, perr := l.Format.Parse(line)
		if perr != nil {
			l.bad(number, perr.Error())
			continue
		}
		l.index = append(l.index, indexed{time: e.Time, offset: start, size: int32(len(line)), line: int32(number)})
		if err == io.EOF {
			return nil
		}
	}
}

func (l *Log) bad(line int, reason string) {
	l.Bad++
	if len(l.BadSamples) < maxBadSamples {
		l.BadSamples = append(l.BadSamples, BadLine{Line: line, Error: reason})
	}
}

// readLine returns the next line without its end, the bytes it took in the file, and whether
// it was cut at maxLineBytes (the rest is skipped).
func readLine(r *bufio.Reader) (line []byte, size int, tooLong bool, err error) {
	var long []byte
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if err == bufio.ErrBufferFull {
			if !tooLong {
				long = append(long, chunk...)
				tooLong = len(long) > maxLineBytes
			}
			continue
		}
		if long != nil && !tooLong {
			chunk = append(long, chunk...)
		}
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		if len(chunk) > maxLineBytes {
			tooLong = true
		}
		return chunk, size, tooLong, err
	}
}

// Requests counts the requests to replay.
func (l *Log) Requests() int { return len(l.index) }

// Close closes the file.
func (l *Log) Close() error { return l.file.Close() }

// Each calls fn with every request in time order, reading the lines again; the Entry is reused.
// It stops at the first error fn returns.
func (l *Log) Each(fn func(line int, e *Entry) error) error {
	w := window{file: l.file}
	for _, ix := range l.index {
		line, err := w.read(ix.offset, int(ix.size))
		if err != nil {
			return fmt.Errorf("%s: line %d: %w", l.Path, ix.line, err)
		}
		e, err := l.Format.Parse(line)
		if err != nil {
			// The file changed since Open read it.
			return fmt.Errorf("%s: line %d changed while replaying: %v", l.Path, ix.line, err)
		}
		if err := fn(int(ix.line), &e); err != nil {
			return err
		}
	}
	return nil
}

// window reads lines at given offsets through a buffer of the file: nearly sorted lines are
// nearly sequential, so most reads hit it.
type window struct {
	file  *os.File
	start int64
	buf   []byte
}

const windowBytes = 4 << 20

func (w *window) read(offset int64, size int) ([]byte, error) {
	if offset >= w.start && offset+int64(size) <= w.start+int64(len(w.buf)) {
		return w.buf[offset-w.start : offset-w.start+int64(size)], nil
	}
	n := max(size, windowBytes)
	if cap(w.buf) < n {
		w.buf = make([]byte, n)
	}
	w.buf = w.buf[:n]
	got, err := w.file.ReadAt(w.buf, offset)
	if got < size {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	w.start, w.buf = offset, w.buf[:got]
	return w.buf[:size], nil
}
