package pool

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ggload/ggload/loader"
)

// Sentinels that the pool's errors wrap (errors.Is).
var (
	// ErrClosed: the pool is closed.
	ErrClosed = errors.New("pool: closed")
	// ErrNotFound: no model has the name.
	ErrNotFound = errors.New("model not found")
	// ErrNotLoaded: the model is not resident and the request asked not
	// to load it.
	ErrNotLoaded = errors.New("model is not loaded")
	// ErrNoRoom: the model does not fit the memory (or the count) the
	// pool can give it, now or within the wait; RoomError says why.
	ErrNoRoom = errors.New("not enough memory")
	// ErrLoad: the model's load failed; LoadError says why.
	ErrLoad = errors.New("failed to load")
	// ErrStale: the model's file changed or disappeared since it was
	// loaded (the loader's ErrFileChanged).
	ErrStale = loader.ErrFileChanged
)

// NotFoundError is a name no model answers to.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("model '%s' not found", e.Name) }
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// Shortage is one device's memory that a model lacks.
type Shortage struct {
	Device string
	Need   uint64 // what the model's plan needs there
	Room   uint64 // what the pool can give it there now
	Budget uint64 // the device's budget
	Held   uint64 // what the resident (and loading) models hold there
	// Pinned and Busy are what models that cannot be evicted now hold
	// there: pinned ones, and ones serving requests or loading.
	Pinned, Busy uint64
	// Free is what the device itself reports free, where that is less
	// than the budget leaves.
	Free uint64
}

// RoomError is a model that does not fit: the devices that lack memory,
// or the count (--models-max) reached by models that cannot be evicted.
type RoomError struct {
	Model  string
	Short  []Shortage
	Max    int  // --models-max, where the count is the reason
	Alone  bool // it does not fit even with every evictable model gone
	Waited bool // it waited (MaxWait, or the request's context) first
}

func (e *RoomError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model '%s' does not fit", e.Model)
	switch {
	case e.Alone:
		b.WriteString(" in the pool's memory even with every other evictable model unloaded")
	case e.Waited:
		b.WriteString(": the models that hold the memory stayed busy")
	}
	for i, s := range e.Short {
		sep := ": "
		if i > 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s needs %d bytes (%s), %d can be given (budget %s, held %s: %s pinned, %s busy)", sep, s.Device, s.Need, mib(s.Need), s.Room, mib(s.Budget), mib(s.Held), mib(s.Pinned), mib(s.Busy))
		if s.Free > 0 && s.Free < s.Budget {
			fmt.Fprintf(&b, ", %s free on the device", mib(s.Free))
		}
	}
	if e.Max > 0 {
		fmt.Fprintf(&b, ": %d models (--models-max) are resident or loading and none can be evicted", e.Max)
	}
	return b.String()
}

func (e *RoomError) Unwrap() error { return ErrNoRoom }

// LoadError is a failed load of a model.
type LoadError struct {
	Model string
	Err   error
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("model name=%s failed to load: %v", e.Model, e.Err)
}

func (e *LoadError) Unwrap() []error { return []error{ErrLoad, e.Err} }

func mib(n uint64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }
