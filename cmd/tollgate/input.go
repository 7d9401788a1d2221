package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/tollgate-proxy/tollgate/config"
)

// errNoStdin is readInput's error for "-" where a command does not read standard input.
var errNoStdin = errors.New(`"-" (standard input) is not read here: give a file`)

// notRegularError is a file that is not a regular file where one is needed.
type notRegularError struct {
	name string
	mode fs.FileMode
}

func (e *notRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: give a regular file", e.name, describeMode(e.mode))
}

// describeMode names the kind of file mode m is.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "not a plain file"
}

// openRegular opens a file for reading and refuses at once anything but a regular file. It
// opens without blocking: open(2) of a named pipe waits for a writer, which may never come, and a
// device or a pipe may never end. Symbolic links are followed.
func openRegular(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, &notRegularError{name: name, mode: info.Mode()}
	}
	return f, nil
}

// readRegularFile reads a whole regular file, such as the module, refusing anything else at once.
func readRegularFile(name string) ([]byte, error) {
	f, err := openRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// stdinHint is what check and serve (loadConfig) add to an error about their configuration file.
func stdinHint(err error) string {
	var notRegular *notRegularError
	if errors.As(err, &notRegular) {
		return ", or - to read standard input"
	}
	return ""
}

// loadConfig reads a configuration with readInput and parses it. What is wrong with it goes to
// stderr, under the command's name or as printProblems' lines, and it reports false: the
// command then exits with 1. A command that reads standard input (stdin not nil) points from a
// file that is not a regular one to "-".
func loadConfig(cmd, name string, stdin io.Reader, stderr io.Writer) ([]byte, *config.Config, bool) {
	data, err := readInput(name, stdin)
	if errors.Is(err, config.ErrTooLarge) {
		printProblems(stderr, name, err)
		return nil, nil, false
	}
	if err != nil {
		hint := ""
		if stdin != nil {
			hint = stdinHint(err)
		}
		fmt.Fprintf(stderr, "tollgate %s: %v%s\n", cmd, err, hint)
		return nil, nil, false
	}
	cfg, err := config.Parse(data)
	if err != nil {
		printProblems(stderr, name, err)
		return nil, nil, false
	}
	return data, cfg, true
}

// readInput reads a configuration from a regular file, or from stdin for "-" (errNoStdin when
// stdin is nil), refusing one larger than config.MaxSize as soon as it has read that much: a
// mistaken multi-gigabyte file, or a pipe that never ends, must end in one line, not in running
// out of memory.
func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		if stdin == nil {
			return nil, errNoStdin
		}
		return readConfig(stdin)
	}
	f, err := openRegular(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readConfig(f)
}

// readConfig reads at most config.MaxSize bytes; more is config.ErrTooLarge.
func readConfig(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, config.MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > config.MaxSize {
		return nil, config.ErrTooLarge
	}
	return data, nil
}

// isTerminal reports whether w is a terminal: a character device other than the null device
// (what a shell redirects to when output is thrown away). Progress is drawn only there: in a
// file or a CI log its carriage returns are noise.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	if err != nil || info.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(info, null)
}
