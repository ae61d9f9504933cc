package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"github.com/ggload/ggload/gguf"
)

// splitURL matches a split's file name (llama.cpp's get_gguf_split_info).
var splitURL = regexp.MustCompile(`(?i)^(.+)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// Parts are the URLs of every split of the model at rawURL: itself alone
// unless its path ends in -0000k-of-0000N.gguf (as llama.cpp finds them).
func Parts(rawURL string) ([]string, error) {
	u, err := CheckURL(rawURL)
	if err != nil {
		return nil, err
	}
	m := splitURL.FindStringSubmatch(u.Path)
	if m == nil {
		return []string{rawURL}, nil
	}
	n, _ := strconv.Atoi(m[3])
	if n <= 1 {
		return []string{rawURL}, nil
	}
	parts := make([]string, n)
	for i := range parts {
		v := *u
		v.Path = fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], i+1, n)
		v.RawPath = ""
		parts[i] = v.String()
	}
	return parts, nil
}

// partsAtOnce is how many parts of a split model are opened at once.
const partsAtOnce = 4

// OpenModel opens the model at rawURL for planning and loading: only the
// headers are fetched. A name that says the model is split
// (-0000k-of-0000N.gguf) is checked against the first part's split.count
// before any other part is asked for: a count that differs is refused,
// and a first part that says it is not split is opened alone, as
// llama.cpp loads it. Close the model to let the connections go.
func OpenModel(ctx context.Context, rawURL string, o Options) (*gguf.Model, error) {
	parts, err := Parts(rawURL)
	if err != nil {
		return nil, err
	}
	// one client for every part, whose connections the last Close lets go
	client, own := o.client()
	o.Client = client
	ok := false
	defer func() {
		if !ok && own {
			client.CloseIdleConnections()
		}
	}()
	first, err := openPart(ctx, context.Background(), parts[0], o, own)
	if err != nil {
		return nil, err
	}
	n, err := splitCount(first)
	if err != nil {
		first.r.Close()
		return nil, err
	}
	if n <= 1 {
		if len(parts) > 1 {
			o.logger().Warn(fmt.Sprintf("httpsrc: %s is named part 1 of %d, but its split.count says it is not split: it is opened alone, as llama.cpp loads it", first.r.name, len(parts)))
		}
		m, err := gguf.NewModel(first.f)
		if err != nil {
			first.r.Close()
			return nil, err
		}
		m.Paths[0] = first.f.Path
		ok = true
		return m, nil
	}
	rest, err := openParts(ctx, parts[1:], o, own)
	if err != nil {
		first.r.Close()
		return nil, err
	}
	srcs := []gguf.Source{first.r.source()}
	for _, p := range rest {
		srcs = append(srcs, p.r.source())
	}
	m, err := gguf.OpenModelSources(srcs...)
	if err != nil {
		for _, s := range srcs {
			s.Closer.Close()
		}
		return nil, err
	}
	ok = true
	return m, nil
}

// splitCount is how many parts the first part's split.count says the
// model has (1 when it has none), checked against the name's count and
// the first part's split.no.
func splitCount(first part) (int, error) {
	f, name := first.f, first.r.name
	v, has := f.Lookup(gguf.KeySplitCount)
	if !has {
		return 1, nil
	}
	if v.Kind() != gguf.TypeUint16 {
		_, err := gguf.NewModel(f) // its error says which type llama.cpp wants
		return 0, err
	}
	c, _ := v.Uint()
	n := int(c)
	if n <= 1 {
		return n, nil
	}
	named := 1
	if m := splitURL.FindStringSubmatch(first.r.url); m != nil {
		named, _ = strconv.Atoi(m[3])
	}
	if named != n {
		if named <= 1 {
			return 0, fmt.Errorf("httpsrc: %s: %w: its split.count says the model is split %d ways, but its name is not <prefix>-00001-of-%05d.gguf: the other parts cannot be found", name, gguf.ErrSplit, n, n)
		}
		return 0, fmt.Errorf("httpsrc: %s: %w: its name says the model is split %d ways (-of-%05d), but its split.count says %d", name, gguf.ErrSplit, named, named, n)
	}
	if v, has := f.Lookup(gguf.KeySplitNo); has {
		if no, _ := v.Uint(); no != 0 {
			return 0, fmt.Errorf("httpsrc: %s: %w: its name says part 1, but its split.no says part %d of %d", name, gguf.ErrNotFirstSplit, no+1, n)
		}
	}
	return n, nil
}

// part is one file of a model, opened, its header parsed.
type part struct {
	r *Reader
	f *gguf.File
}

// openPart opens the file at rawURL and parses its header; the reader is
// frozen, keeping the bytes the parse read for the model's own parse. A
// panic of user code (Options.Progress, a caller's client) is an error.
func openPart(ctx, opening context.Context, rawURL string, o Options, own bool) (p part, err error) {
	defer func() {
		if v := recover(); v != nil {
			if p.r != nil {
				p.r.Close()
			}
			p, err = part{}, fmt.Errorf("httpsrc: %s: opening it %w: %v", Redact(rawURL), errPanic, v)
		}
	}()
	if p.r, err = open(ctx, opening, rawURL, o); err != nil {
		return part{}, err
	}
	p.r.own = own
	if p.f, err = gguf.OpenSource(p.r.source()); err != nil {
		p.r.Close()
		if errors.Is(err, gguf.ErrTruncated) {
			err = fmt.Errorf("httpsrc: the server's size of %s (%d bytes) is less than the GGUF's header implies: %w", p.r.name, p.r.size, err)
		}
		return part{}, err
	}
	p.r.Freeze()
	return p, nil
}

// openParts opens the parts at urls, partsAtOnce at a time; the first
// failure cancels the others, and every part opened is closed.
func openParts(ctx context.Context, urls []string, o Options, own bool) ([]part, error) {
	opening, cancel := context.WithCancel(ctx)
	defer cancel()
	parts := make([]part, len(urls))
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	turns := make(chan struct{}, partsAtOnce)
	for i, u := range urls {
		select {
		case turns <- struct{}{}:
		case <-opening.Done():
		}
		if opening.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-turns }()
			p, err := openPart(ctx, opening, u, o, own)
			if err != nil {
				fail(err) // (its URL says which part it is)
				return
			}
			parts[i] = p
		})
	}
	wg.Wait()
	if first == nil && opening.Err() != nil {
		first = fmt.Errorf("httpsrc: opening the other parts: %w", context.Cause(opening)) // ctx's own end
	}
	if first != nil {
		for _, p := range parts {
			if p.r != nil {
				p.r.Close()
			}
		}
		return nil, first
	}
	return parts, nil
}
