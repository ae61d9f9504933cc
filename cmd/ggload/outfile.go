package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// outFile is a file a command writes (run's --logits-out and --embd-out).
// It is never one of the command's inputs (checkOutputs), and it is
// written to a temporary file beside its destination, renamed into place
// once complete: a run that fails leaves what was there whole. A
// destination that is not a regular file (/dev/null, a pipe) is written
// in place.
type outFile struct {
	flag, path string
	f          *os.File
	w          *bufio.Writer
	tmp        string // "" when written in place
}

// createOut opens the output of flag at path.
func createOut(flag, path string) (*outFile, error) {
	o := &outFile{flag: flag, path: path}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, fmt.Errorf("%s %s: a directory", flag, path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		o.f = f
	} else {
		// a name of its own beside the destination (a rename does not
		// cross file systems), made with the umask's mode, as os.Create
		// makes a file
		dir, base := filepath.Split(path)
		for range 100 {
			var r [6]byte
			rand.Read(r[:])
			tmp := filepath.Join(dir, "."+base+"."+hex.EncodeToString(r[:])+".tmp")
			f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
			if errors.Is(err, os.ErrExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			o.f, o.tmp = f, tmp
			break
		}
		if o.f == nil {
			return nil, fmt.Errorf("%s: no temporary file could be made beside %s", flag, path)
		}
	}
	o.w = bufio.NewWriterSize(o.f, 1<<20)
	return o, nil
}

func (o *outFile) Write(p []byte) (int, error) { return o.w.Write(p) }

// commit writes out what is buffered and renames the file into place.
func (o *outFile) commit() error {
	err := o.w.Flush()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && o.tmp != "" {
		err = os.Rename(o.tmp, o.path)
	}
	if err != nil {
		o.abort()
		return fmt.Errorf("%s: %w", o.flag, err)
	}
	o.tmp = ""
	return nil
}

// abort drops what was written: the destination is left as it was.
func (o *outFile) abort() {
	if o == nil {
		return
	}
	o.f.Close()
	if o.tmp != "" {
		os.Remove(o.tmp)
		o.tmp = ""
	}
}

// checkOutputs refuses an output that is one of the inputs, or another
// output, by file identity (device and inode, through any link or name),
// not by name: writing it would destroy the input, a mapped model's
// pages under the running process included. An output that does not
// exist yet is compared by its directory's identity and its name.
func checkOutputs(outputs map[string]string, inputs map[string][]string) error {
	type ident struct {
		fi   os.FileInfo // an existing file
		dir  os.FileInfo // else its directory's, and its name
		name string
	}
	id := func(path string) (ident, bool) {
		if fi, err := os.Stat(path); err == nil {
			return ident{fi: fi}, true
		}
		dir, err := os.Stat(filepath.Dir(path))
		if err != nil {
			return ident{}, false
		}
		return ident{dir: dir, name: filepath.Base(path)}, true
	}
	same := func(a, b ident) bool {
		if a.fi != nil || b.fi != nil {
			return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi)
		}
		return a.name == b.name && os.SameFile(a.dir, b.dir)
	}
	var flags []string
	for flag := range outputs {
		flags = append(flags, flag)
	}
	slices.Sort(flags)
	for i, flag := range flags {
		out, ok := id(outputs[flag])
		if !ok {
			continue // (creating it says why)
		}
		if out.fi != nil && !out.fi.Mode().IsRegular() {
			continue // a device or a pipe is written in place, never an input
		}
		for what, paths := range inputs {
			for _, p := range paths {
				if in, ok := id(p); ok && in.fi != nil && same(out, in) {
					return fmt.Errorf("%s %s is %s %s: ggload never writes an input file", flag, outputs[flag], what, p)
				}
			}
		}
		for _, other := range flags[i+1:] {
			if o2, ok := id(outputs[other]); ok && same(out, o2) {
				return fmt.Errorf("%s %s and %s %s are the same file", flag, outputs[flag], other, outputs[other])
			}
		}
	}
	return nil
}

// boundedRead reads r up to limit bytes; more is an error naming what and
// the limit (a prompt larger than any context can take, or /dev/zero).
func boundedRead(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %s, %w", what, sizeString(limit), errPromptTooLarge)
	}
	return b, nil
}

// errPromptTooLarge is wrapped by boundedRead's error past its limit.
var errPromptTooLarge = errors.New("ggload's limit on a prompt")

// readPromptFile reads a prompt file (-f), bounded as boundedRead.
func readPromptFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return boundedRead(f, maxPromptBytes, path)
}

// maxPromptBytes bounds a prompt read from a file or the standard input:
// 64 MiB of text, some 16 million tokens, more than any model's context
// holds.
const maxPromptBytes = 64 << 20
