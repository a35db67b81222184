package pbdecode

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// readStatus reads one map entry of the status.
func readStatus(parent *fieldReader, res *pbresource.Resource, in *interner) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	var k string
	var st *pbresource.Status
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			break
		}
		if (num != pblayout.MapKey && num != pblayout.MapValue) || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if num == pblayout.MapKey {
			if k, ok = r.str(); !ok {
				return false
			}
			continue
		}
		if st, ok = readStatusMessage(&r, in); !ok {
			return false
		}
	}
	if st == nil {
		st = new(pbresource.Status)
	}
	if parent.fix != nil {
		parent.fix.statusEntry(res, k, st)
		return true
	}
	if res.Status == nil {
		res.Status = make(map[string]*pbresource.Status, 2)
	}
	res.Status[k] = st
	return true
}

// readStatusMessage reads a Status into a block of its own.
func readStatusMessage(parent *fieldReader, in *interner) (*pbresource.Status, bool) {
	r, ok := parent.sub()
	if !ok {
		return nil, false
	}
	blk := new(pblayout.StatusBlock)
	strs := pblayout.StatusStrings(&blk.Status)
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return nil, false
		}
		if !more {
			return &blk.Status, true
		}
		if num < 1 || num > maxField || wt != protowire.BytesType {
			return nil, false
		}
		if num != pblayout.StatusConditions {
			if seen&(1<<num) != 0 {
				return nil, false
			}
			seen |= 1 << num
		}
		switch num {
		case pblayout.StatusConditions:
			ok = readCondition(&r, blk.AddCondition(), in)
		case pblayout.StatusUpdatedAt:
			ok = readTimestamp(&r, blk.SetUpdatedAt())
		default:
			ok = readString(&r, strs[:], num)
		}
		if !ok {
			return nil, false
		}
	}
}

func readCondition(parent *fieldReader, c *pbresource.Condition, in *interner) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	strs := pblayout.ConditionStrings(c)
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if num < 1 || num > maxField || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		switch {
		case num == pblayout.ConditionState && wt == protowire.VarintType:
			v, ok := r.varint()
			if !ok {
				return false
			}
			c.State = pbresource.Condition_State(int32(v)) // open enum: as the generic decoder does
		case num == pblayout.ConditionResource && wt == protowire.BytesType:
			c.Resource = new(pbresource.Reference)
			ok = readReference(&r, c.Resource, in)
		case wt == protowire.BytesType:
			ok = readString(&r, strs[:], num)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
}

func readReference(parent *fieldReader, ref *pbresource.Reference, in *interner) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	strs := pblayout.ReferenceStrings(ref)
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if num < 1 || num > maxField || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		switch num {
		case pblayout.ReferenceType:
			ref.Type, ok = readType(&r, in)
		case pblayout.ReferenceTenancy:
			ref.Tenancy, ok = readTenancy(&r, in)
		default:
			ok = readString(&r, strs[:], num)
		}
		if !ok {
			return false
		}
	}
}

func readTimestamp(parent *fieldReader, ts *timestamppb.Timestamp) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if (num != pblayout.TimestampSeconds && num != pblayout.TimestampNanos) || wt != protowire.VarintType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		v, ok := r.varint()
		if !ok {
			return false
		}
		if num == pblayout.TimestampSeconds {
			ts.Seconds = int64(v)
		} else {
			ts.Nanos = int32(v)
		}
	}
}
