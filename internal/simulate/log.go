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

// GiveUpLines and GiveUpBytes bound what Open reads without finding a request: past either, in
// a row, the format is wrong or the file is no access log, and reading on could last forever.
const (
	GiveUpLines = 10_000
	GiveUpBytes = 64 << 20
)

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

	file *os.File
	// spool: file is a temporary copy of a log that is not a regular file, removed on Close.
	spool bool
	index []indexed
}

type indexed struct {
	time   int64
	offset int64
	size   int32
	line   int32
}

// Input is a log to read: a file, or a stream such as standard input.
type Input struct {
	// Path names the log in messages and summary.json; Open opens it unless Reader is set.
	Path string
	// Reader, when set, is read instead of Path (and copied to a temporary file as it is).
	Reader io.Reader
	// Progress, when set, is called every ProgressLines lines read, with the lines so far.
	Progress func(lines int)
}

// ProgressLines is how often Input.Progress is called.
const ProgressLines = 1 << 16

// Open reads and checks every line of the log at path and sorts the requests by start time:
// Envoy writes a line when its request ends, so lines are out of start order by up to the
// longest request. Requests with the same start time keep their order in the file. It fails when
// the log has no request or more than MaxBadShare of its lines are bad (the error names the
// first bad lines), and as soon as GiveUpLines lines or GiveUpBytes bytes in a row hold no
// request, so that a wrong --format or a file that never ends (/dev/zero) stops early. A log
// that is not a regular file (a pipe, a device) is copied to a temporary file as it is read,
// since the replay reads its lines again. Close the Log when done.
func Open(path string, format Format) (*Log, error) {
	return OpenInput(Input{Path: path}, format)
}

// OpenInput is Open for a file or a stream, with progress.
func OpenInput(in Input, format Format) (*Log, error) {
	src := in.Reader
	if src == nil {
		f, err := os.Open(in.Path)
		if err != nil {
			return nil, err
		}
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() {
			return load(&Log{Path: in.Path, Format: format, file: f}, f, in.Progress)
		}
		defer f.Close() // only the copy is read again
		src = f
	}
	spool, err := os.CreateTemp("", "tollgate-simulate-*.log")
	if err != nil {
		return nil, fmt.Errorf("%s is not a regular file, and a temporary copy cannot be made: %w", in.Path, err)
	}
	l := &Log{Path: in.Path, Format: format, file: spool, spool: true}
	return load(l, io.TeeReader(src, spool), in.Progress)
}

// load scans the log from src, checks it and sorts its index.
func load(l *Log, src io.Reader, progress func(lines int)) (*Log, error) {
	if err := l.scan(src, progress); err != nil {
		l.Close()
		return nil, err
	}
	path, format := l.Path, l.Format
	if len(l.index) == 0 {
		l.Close()
		if l.Bad > 0 {
			return nil, fmt.Errorf("%s: no line is a %s request (%d bad); first: %s", path, format, l.Bad, l.badSummary())
		}
		return nil, fmt.Errorf("%s: no requests", path)
	}
	if share := float64(l.Bad) / float64(l.Lines); share > MaxBadShare {
		l.Close()
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

func (l *Log) scan(src io.Reader, progress func(lines int)) error {
	r := bufio.NewReaderSize(src, 256<<10)
	var offset int64
	// The lines and bytes read since the last request (or the start).
	var fruitlessLines int
	var fruitlessBytes int64
	for number := 1; ; number++ {
		line, size, tooLong, err := readLine(r, GiveUpBytes-fruitlessBytes)
		if err == io.EOF && size == 0 {
			return nil
		}
		start := offset
		offset += int64(size)
		fruitlessBytes += int64(size)
		if errors.Is(err, errLineBudget) {
			return l.giveUp(number, fruitlessLines, fruitlessBytes, true)
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s: line %d: %w", l.Path, number, err)
		}
		if len(bytes.TrimSpace(line)) == 0 && !tooLong {
			continue
		}
		l.Lines++
		if progress != nil && l.Lines%ProgressLines == 0 {
			progress(l.Lines)
		}
		if e, reason := l.parse(line, tooLong); reason != "" {
			l.bad(number, reason)
			if fruitlessLines++; fruitlessLines >= GiveUpLines || fruitlessBytes >= GiveUpBytes {
				return l.giveUp(number, fruitlessLines, fruitlessBytes, false)
			}
		} else {
			l.index = append(l.index, indexed{time: e.Time, offset: start, size: int32(len(line)), line: int32(number)})
			fruitlessLines, fruitlessBytes = 0, 0
		}
		if err == io.EOF {
			return nil
		}
	}
}

// parse reads one non-blank line, or says why it is a bad line.
func (l *Log) parse(line []byte, tooLong bool) (Entry, string) {
	if tooLong {
		return Entry{}, fmt.Sprintf("longer than %d bytes", maxLineBytes)
	}
	e, err := l.Format.Parse(line)
	if err != nil {
		return Entry{}, err.Error()
	}
	return e, ""
}

// giveUp is the error of a log in which GiveUpLines lines or GiveUpBytes bytes in a row hold no
// request: the counts so far, and what is most likely wrong.
func (l *Log) giveUp(line, lines int, size int64, unended bool) error {
	what := fmt.Sprintf("%s lines (%s bytes) in a row hold no %s request", Thousands(int64(lines)), Thousands(size), l.Format)
	if unended {
		what = fmt.Sprintf("%d MiB in a row hold no %s request, and line %d has not ended", GiveUpBytes>>20, l.Format, line)
	}
	first := l.badSummary()
	if first == "" {
		first = fmt.Sprintf("line %d: longer than %d bytes", line, maxLineBytes)
	}
	return fmt.Errorf("%s: gave up at line %d: %s (%d requests and %d bad lines so far): "+
		"is --format right (envoy-json or combined), and is this an access log? first: %s",
		l.Path, line, what, len(l.index), l.Bad, first)
}

func (l *Log) bad(line int, reason string) {
	l.Bad++
	if len(l.BadSamples) < maxBadSamples {
		l.BadSamples = append(l.BadSamples, BadLine{Line: line, Error: reason})
	}
}

// errLineBudget is readLine's error for a line that went on past its budget of bytes.
var errLineBudget = errors.New("line over budget")

// readLine returns the next line without its end, the bytes it took in the file, and whether
// it was cut at maxLineBytes (the rest is skipped). A line that takes more than budget bytes
// without ending is given up with errLineBudget: a file without a newline may never end.
func readLine(r *bufio.Reader, budget int64) (line []byte, size int, tooLong bool, err error) {
	var long []byte
	for {
		chunk, err := r.ReadSlice('\n')
		size += len(chunk)
		if err == bufio.ErrBufferFull {
			if int64(size) > budget {
				return nil, size, true, errLineBudget
			}
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

// Close closes the file (and removes the temporary copy of a log that is not a regular file).
func (l *Log) Close() error {
	err := l.file.Close()
	if l.spool {
		if rmErr := os.Remove(l.file.Name()); err == nil {
			err = rmErr
		}
	}
	return err
}

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
