package loader

import (
	"fmt"
	"unsafe"

	"github.com/ggload/ggload/ggml"
)

// Tensors bound for an RPC server that the guard does not send itself
// (rpcdirect.go; RPCOptions.Direct or NativeSets) are queued on the
// device's backend (ggml_backend_tensor_set_async) rather than set one
// call at a time. The
// pinned RPC client copies the tensor into its message (and, above 10 MiB
// into a weight buffer, hashes it for the server's file cache and asks the
// server first) in the calling goroutine, then hands the message to its
// connection's sender thread and returns: the lane's bounce buffer is free
// again at once, and the next tensor is read, hashed and copied while this
// one is on the wire. Set one call at a time, the link stood idle for each
// tensor's read, hash and copy (about a seventh of a 1 Gbit/s load).
//
// At most two messages are queued: before a third is made the oldest must
// have been sent, so a server's load holds one bounce buffer and two of
// the client's messages, each at most the biggest tensor. Messages to one
// server keep the lane's order (the client's queue is first in, first
// out), so tensors still go whole and the cache's hashes still match.

// rpcQueued is how many messages a lane may have queued to one server.
const rpcQueued = 2

// rpcQueue is a lane's queue of sets to one RPC device: an event after
// each message, used in turn, and waited on before it is used again.
type rpcQueue struct {
	backend  *ggml.Backend
	events   [rpcQueued]*ggml.Event
	recorded [rpcQueued]bool
	next     int
}

// rpcQueueFor returns the lane's queue to RPC device dev, making it on
// first use.
func (ln *lane) rpcQueueFor(dev *ggml.Device) (*rpcQueue, error) {
	if q, ok := ln.rpcs[dev]; ok {
		return q, nil
	}
	q := &rpcQueue{}
	be, err := dev.NewBackend()
	if err != nil {
		return nil, fmt.Errorf("loader: queue to %s: %w", dev.Name(), err)
	}
	q.backend = be
	for i := range q.events {
		ev, err := dev.NewEvent()
		if err != nil {
			q.close()
			return nil, fmt.Errorf("loader: queue to %s: %w", dev.Name(), err)
		}
		q.events[i] = ev
	}
	if ln.rpcs == nil {
		ln.rpcs = map[*ggml.Device]*rpcQueue{}
	}
	ln.rpcs[dev] = q
	return q, nil
}

// rpcSend reads task t whole into a bounce buffer, counted as done as it is
// read, and queues it to its RPC server once fewer than rpcQueued messages
// are waiting there.
func (ln *lane) rpcSend(t task, src source) error {
	l := ln.l
	tp, w, b := t.pl.Plan, t.w, t.pl.Buffer
	if w.Size == 0 {
		return nil
	}
	q, err := ln.rpcQueueFor(b.Device)
	if err != nil {
		return err
	}
	buf, err := ln.bounceBuf(w.Size, tp.Name)
	if err != nil {
		return err
	}
	defer ln.putBounce(buf)
	if err := ln.readReporting(t.pl.Path, src, buf, w.Offset); err != nil {
		return fmt.Errorf("loader: tensor '%s': %w", tp.Name, namingFile(err, src.file(), w))
	}
	if l.o.CheckTensors {
		l.validateSync(tp.Name, tp.Type, unsafe.Pointer(&buf[0]), uint64(len(buf)))
	}
	ln.sample(t, q, buf)
	slot, err := q.room()
	if err != nil {
		return fmt.Errorf("loader: tensor '%s' to %s: %w", tp.Name, b.Device.Name(), err)
	}
	if err := deviceErr(b, tp.Name); err != nil {
		return err
	}
	// the RPC client has copied buf into its own message when this returns
	if err := q.backend.SetTensorAsync(t.pl.Tensor, unsafe.Pointer(&buf[0]), 0, uint64(len(buf))); err != nil {
		return fmt.Errorf("loader: tensor '%s' to %s: %w", tp.Name, b.Device.Name(), err)
	}
	if err := q.events[slot].Record(q.backend); err != nil {
		return fmt.Errorf("loader: tensor '%s' to %s: %w", tp.Name, b.Device.Name(), err)
	}
	q.recorded[slot] = true
	return deviceErr(b, tp.Name)
}

// room waits until fewer than rpcQueued messages are queued and returns the
// event free for the next one.
func (q *rpcQueue) room() (int, error) {
	slot := q.next
	q.next = (slot + 1) % rpcQueued
	if !q.recorded[slot] {
		return slot, nil
	}
	q.recorded[slot] = false
	return slot, q.events[slot].Synchronize()
}

// close waits for the queued messages to be sent and frees the queue.
func (q *rpcQueue) close() error {
	var first error
	if q.backend != nil && q.recorded != [rpcQueued]bool{} {
		if err := q.backend.Synchronize(); err != nil {
			first = fmt.Errorf("loader: waiting for the last sets: %w", err)
		}
	}
	q.recorded = [rpcQueued]bool{}
	for i, ev := range q.events {
		ev.Free()
		q.events[i] = nil
	}
	if q.backend != nil {
		q.backend.Free()
		q.backend = nil
	}
	return first
}
