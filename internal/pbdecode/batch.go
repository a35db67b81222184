package pbdecode

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// WatchMessage decodes one message of a WatchList stream into ev: a
// Batch's events each as WatchEvent decodes them, any other event as
// WatchEvent does. It keeps nothing of b.
func (d *Decoder) WatchMessage(b []byte, ev *pbresource.WatchEvent) error {
	events, ok := d.batch(b)
	if !ok {
		return d.WatchEvent(b, ev)
	}
	ev.Reset()
	ev.Event = &pbresource.WatchEvent_Batch_{Batch: &pbresource.WatchEvent_Batch{Events: events}}
	return nil
}

// batch decodes b when it is exactly one Batch holding nothing but events;
// ok is false otherwise (not a batch, or one the generic decoder must
// merge or check), and when an event in it is malformed, for the generic
// decoder to report.
func (d *Decoder) batch(b []byte) (events []*pbresource.WatchEvent, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != pblayout.WatchEventBatch || typ != protowire.BytesType {
		return nil, false
	}
	body, m := protowire.ConsumeBytes(b[n:])
	if m < 0 || n+m != len(b) {
		return nil, false // a second field merges with the first
	}
	// Count the events first, to allocate them in one block.
	count := 0
	for rest := body; len(rest) > 0; count++ {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 || num != pblayout.BatchEvents || typ != protowire.BytesType {
			return nil, false
		}
		_, m := protowire.ConsumeBytes(rest[n:])
		if m < 0 {
			return nil, false
		}
		rest = rest[n+m:]
	}
	block := make([]pbresource.WatchEvent, count)
	events = make([]*pbresource.WatchEvent, count)
	for i := range events {
		_, _, n := protowire.ConsumeTag(body)
		v, m := protowire.ConsumeBytes(body[n:])
		body = body[n+m:]
		ev := &block[i]
		if err := d.WatchEvent(v, ev); err != nil {
			return nil, false
		}
		events[i] = ev
	}
	return events, true
}
