package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// The limits on what one resource may hold. The size limit is
// Config.MaxResourceBytes; the others are fixed. A write that breaks one is
// InvalidArgument naming the field. See the package documentation for how
// they apply to resources stored before a limit was lowered.
const (
	// DefaultMaxResourceBytes is the size limit of a stored resource when
	// Config.MaxResourceBytes is zero: 1 MiB. One resource must always fit
	// in one gRPC message (a Read response, a watch event), whose default
	// limit is 4 MiB for clients, and in one etcd request, whose default
	// limit (--max-request-bytes) is 1.5 MiB; 1 MiB stays well under both
	// with room for the request's other fields.
	DefaultMaxResourceBytes = 1 << 20

	// MaxFinalizers is the most finalizer names a resource's finalizers
	// metadata may hold (each controller adds one of its own).
	MaxFinalizers = 128

	// MaxFinalizerNameLength is the longest finalizer name, in bytes.
	MaxFinalizerNameLength = 256

	// MaxMetadataKeys is the most metadata entries a resource may have,
	// besides the finalizers and deletionTimestamp entries (so that a
	// controller can always add its finalizer, and Delete its mark).
	MaxMetadataKeys = 64

	// MaxMetadataKeyLength is the longest metadata key, in bytes.
	MaxMetadataKeyLength = 256

	// MaxMetadataValueLength is the longest metadata value, in bytes: room
	// for MaxFinalizers names of the longest length.
	MaxMetadataValueLength = 64 << 10

	// MaxStatusKeys is the most status keys (one per controller that
	// reports on the resource) a resource may have. A WriteStatus copies
	// and sizes every key of the resource, and the in-memory backend
	// copies them again: at 32 keys it costs about 6 times what it costs
	// at one (BenchmarkWriteStatusKeys; 12 times at 64 keys).
	MaxStatusKeys = 32
)

// The bounds on List and ListByOwner responses. A response holds the
// stored resources themselves (nothing is copied until gRPC marshals it),
// so what a List costs the server is, about, its marshalled size and the
// copies gRPC makes of it while it sends it: the bounds are on that size,
// counted as the response is filled.
const (
	// DefaultMaxListBytes bounds the encoded size of a List or ListByOwner
	// response when Config.MaxListBytes is zero: 32 MiB. A List without
	// page_size or page_token (as Consul's clients send) whose answer
	// would be bigger is ResourceExhausted, telling the client to page; a
	// page that would be bigger ends early, with a next_page_token. An
	// unpaged answer of that size is already eight times what a gRPC
	// client receives by default (4 MiB).
	DefaultMaxListBytes = 32 << 20

	// DefaultMaxLargeLists is how many large Lists (and ListByOwners) a
	// server builds at once when Config.MaxLargeLists is zero. A List is
	// large once its response passes LargeListBytes; it then waits up to
	// LargeListWait for one of these slots, and is ResourceExhausted if
	// none frees up.
	DefaultMaxLargeLists = 4

	// LargeListBytes is the response size from which a List counts as
	// large: gRPC's default limit on a message a client receives (4 MiB),
	// so the Lists a default client can receive at all are never held up.
	LargeListBytes = 4 << 20

	// LargeListWait is how long a large List waits for a slot (see
	// DefaultMaxLargeLists) before it is refused, unless its deadline
	// comes first.
	LargeListWait = time.Second
)

// limits are the limits a Server enforces. They are fields, not the
// constants themselves, so that tests and benchmarks of this package can
// lift them.
type limits struct {
	resourceBytes int
	finalizers    int
	finalizerName int
	metadataKeys  int
	metadataKey   int
	metadataValue int
	statusKeys    int
	listBytes     int           // see DefaultMaxListBytes
	largeList     int           // see LargeListBytes
	largeListWait time.Duration // see LargeListWait
}

func newLimits(maxResourceBytes, maxListBytes int) limits {
	if maxResourceBytes == 0 {
		maxResourceBytes = DefaultMaxResourceBytes
	}
	if maxListBytes == 0 {
		maxListBytes = DefaultMaxListBytes
	}
	return limits{
		listBytes:     maxListBytes,
		largeList:     min(LargeListBytes, maxListBytes),
		largeListWait: LargeListWait,
		resourceBytes: maxResourceBytes,
		finalizers:    MaxFinalizers,
		finalizerName: MaxFinalizerNameLength,
		metadataKeys:  MaxMetadataKeys,
		metadataKey:   MaxMetadataKeyLength,
		metadataValue: MaxMetadataValueLength,
		statusKeys:    MaxStatusKeys,
	}
}

// checkMetadata checks the metadata a Write would store against the
// limits. stored is the stored resource's metadata (nil when there is
// none): what is stored already is never refused again, so a limit lowered
// after a resource was written does not freeze it; counts may stay over a
// limit but not grow.
func (l *limits) checkMetadata(meta, stored map[string]string) error {
	if n := ownKeys(meta); n > l.metadataKeys && n > ownKeys(stored) {
		return invalidField("metadata", "has %d keys; the limit is %d (server.MaxMetadataKeys)", n, l.metadataKeys)
	}
	for k, v := range meta {
		if len(k) <= l.metadataKey && len(v) <= l.metadataValue {
			continue
		}
		if sv, ok := stored[k]; ok && sv == v {
			continue
		}
		if len(k) > l.metadataKey {
			return invalidField("metadata", "key %s is %d bytes long; the limit is %d", resource.Quote(k), len(k), l.metadataKey)
		}
		if k != resource.FinalizerKey { // the finalizers' own limits say more
			return invalidField("metadata", "the value of key %s is %d bytes long; the limit is %d",
				resource.Quote(k), len(v), l.metadataValue)
		}
	}
	return l.checkFinalizers(meta[resource.FinalizerKey], stored[resource.FinalizerKey])
}

// ownKeys is the number of meta's entries that MaxMetadataKeys counts:
// those other than finalizers and deletionTimestamp.
func ownKeys(meta map[string]string) int {
	n := len(meta)
	for _, k := range [...]string{resource.FinalizerKey, resource.DeletionTimestampKey} {
		if _, ok := meta[k]; ok {
			n--
		}
	}
	return n
}

// checkFinalizers checks the finalizers value a Write would store against
// the limits. stored is the stored value ("" when none); a value that adds
// no name to it, nor more names than it has, is accepted whatever its size,
// so finalizers stored before a limit was lowered can still be removed one
// by one. It takes time linear in the lengths of the values.
func (l *limits) checkFinalizers(raw, stored string) error {
	if raw == stored {
		return nil
	}
	count, longest := scanFinalizers(raw)
	if count <= l.finalizers && len(longest) <= l.finalizerName && len(raw) <= l.finalizerBytes() {
		return nil
	}
	if stored != "" && len(raw) <= len(stored) {
		if storedCount, _ := scanFinalizers(stored); count <= storedCount {
			if _, added := addedFinalizer(raw, stored); !added {
				return nil
			}
		}
	}
	const field = "metadata." + resource.FinalizerKey
	if len(longest) > l.finalizerName {
		return invalidField(field, "finalizer %s is %d bytes long; the limit is %d (server.MaxFinalizerNameLength)",
			resource.Quote(longest), len(longest), l.finalizerName)
	}
	if count > l.finalizers {
		return invalidField(field, "names %d finalizers; the limit is %d (server.MaxFinalizers)", count, l.finalizers)
	}
	return invalidField(field, "is %d bytes long; the limit is %d", len(raw), l.finalizerBytes())
}

// checkStatusKeys checks that writing status key to stored keeps the
// number of status keys within the limit. Keys already stored may always
// be written.
func (l *limits) checkStatusKeys(stored *pbresource.Resource, key string) error {
	if len(stored.Status) < l.statusKeys {
		return nil
	}
	if _, ok := stored.Status[key]; ok {
		return nil
	}
	return invalidField("key", "%s would be status key number %d of resource %s; the limit is %d (server.MaxStatusKeys): write to one of its keys or remove statuses",
		resource.Quote(key), len(stored.Status)+1, resource.ReferenceString(stored.Id), l.statusKeys)
}

// Room the size limit keeps for what the service adds to a resource after
// a write was checked: the Version the backend sets (a decimal revision of
// at most 20 digits) and the deletionTimestamp entry Delete adds to a
// resource with finalizers. Counting them up front means that whatever a
// Write was allowed to store can still be marked for deletion.
var (
	versionRoom = protowire.SizeTag(3) + protowire.SizeBytes(20)
	markRoom    = protowire.SizeTag(5) + protowire.SizeBytes(
		protowire.SizeTag(1)+protowire.SizeBytes(len(resource.DeletionTimestampKey))+
			protowire.SizeTag(2)+protowire.SizeBytes(len("2006-01-02T15:04:05Z")))
)

// ulidRoom is the room kept for a Uid or Generation not set yet (a ULID
// has 26 characters); one more byte covers the ID's length prefix growing.
var ulidRoom = protowire.SizeTag(1) + protowire.SizeBytes(26) + 1

// storedSize is the size the limit counts for res: its encoded size as
// stored, with room for its next Version, for a Uid and Generation if it
// has none yet (MutateAndValidate) and, unless it is marked already, for a
// deletion mark.
func storedSize(res *pbresource.Resource) int {
	n := resourceSize(res) + versionRoom
	if res.Version != "" {
		n -= protowire.SizeTag(3) + protowire.SizeBytes(len(res.Version))
	}
	if res.GetId().GetUid() == "" {
		n += ulidRoom
	}
	if res.Generation == "" {
		n += ulidRoom
	}
	if _, marked := res.Metadata[resource.DeletionTimestampKey]; !marked {
		n += markRoom
	}
	return n
}

// checkSize refuses to store res when it is over the size limit, unless
// stored (the resource it replaces, nil for a new one) was already as big:
// a resource stored before the limit was lowered may be written as long as
// the write does not make it bigger. field names what the request set that
// made it so big; empty means the bigger of data and metadata.
func (l *limits) checkSize(res, stored *pbresource.Resource, field string) error {
	n := storedSize(res) + l.finalizerRoom(res.Metadata)
	if n <= l.resourceBytes || (stored != nil && n <= storedSize(stored)+l.finalizerRoom(stored.Metadata)) {
		return nil
	}
	return tooLarge(res, n, field, l.resourceBytes)
}

// finalizerRoom is the room the size limit keeps, in a resource with
// metadata meta, for the finalizers it could still be given: the size of
// the longest finalizers entry the limits allow, less that of the one meta
// has. A resource marked for deletion gets no more finalizers, so it needs
// none.
//
// Counting it up front means that a controller can always add its
// finalizer to whatever a Write was allowed to store, as long as the
// finalizer limits allow it: without it, a resource that fits the size
// limit but not with the finalizer added would make the controller retry
// forever. Keeping room for only the finalizers of the controllers that
// manage the type would cost less, but the server does not know them: a
// controller in another process (package remote) or another program adds
// finalizers the server has never heard of. The room is about 32 KiB (128
// names of 256 bytes), 3% of the default size limit; with a size limit
// under 256 KiB, the finalizers' bytes are limited to an eighth of it
// (finalizerBytes).
func (l *limits) finalizerRoom(meta map[string]string) int {
	if _, marked := meta[resource.DeletionTimestampKey]; marked {
		return 0
	}
	room := finalizersEntrySize(l.finalizerBytes())
	if v, ok := meta[resource.FinalizerKey]; ok {
		room -= finalizersEntrySize(len(v))
	}
	return max(room, 0)
}

// finalizerBytes is the longest a finalizers value may be: MaxFinalizers
// names of MaxFinalizerNameLength bytes with spaces between them, within
// MaxMetadataValueLength and an eighth of the size limit (so that the room
// finalizerRoom keeps leaves most of a small limit to the resource).
func (l *limits) finalizerBytes() int {
	return min(l.metadataValue, l.finalizers*(l.finalizerName+1)-1, l.resourceBytes/8)
}

// finalizersEntrySize is the encoded size of a Resource's finalizers
// metadata entry holding n bytes.
func finalizersEntrySize(n int) int {
	return fieldSize(pblayout.ResourceMetadata, fieldSize(pblayout.MapKey, len(resource.FinalizerKey))+fieldSize(pblayout.MapValue, n))
}

// checkStatusSize is checkSize for a status write: stored, with st under
// key. It sizes stored once and corrects for the one entry that changes,
// building the new resource only for an error.
func (l *limits) checkStatusSize(stored *pbresource.Resource, key string, st *pbresource.Status) error {
	n, old := statusWriteSize(stored, key, st)
	room := l.finalizerRoom(stored.Metadata)
	n += room
	if n <= l.resourceBytes || n <= old+room {
		return nil
	}
	return tooLarge(storage.WithStatus(stored, key, st), n, "status", l.resourceBytes)
}

// statusWriteSize returns storedSize of stored with st under key, and of
// stored.
func statusWriteSize(stored *pbresource.Resource, key string, st *pbresource.Status) (n, old int) {
	old = storedSize(stored)
	n = old + statusEntrySize(key, st)
	if prev, ok := stored.Status[key]; ok {
		n -= statusEntrySize(key, prev)
	}
	return n, old
}

// tooLarge is the error for res, n bytes as stored, when the limit is
// limit bytes (or unknown, 0: the backend refused it).
func tooLarge(res *pbresource.Resource, n int, field string, limit int) error {
	data := dataSize(res.Data)
	meta, st := metadataSize(res.Metadata), statusSize(res.Status)
	if field == "" {
		field = "data"
		if meta > data {
			field = "metadata"
		}
	}
	parts := fmt.Sprintf("data %s, metadata %s, status %s", formatBytes(data), formatBytes(meta), formatBytes(st))
	if limit == 0 {
		return invalidField(field, "the resource would be %s (%d bytes: %s), more than the storage backend accepts in one request",
			formatBytes(n), n, parts)
	}
	return invalidField(field, "the resource would be %s (%d bytes: %s, with room for finalizers and a deletion mark), over the limit of %s (server.Config.MaxResourceBytes)",
		formatBytes(n), n, parts, formatBytes(limit))
}

// formatBytes renders n bytes for people: "512 B", "1.5 KiB", "1 MiB".
func formatBytes(n int) string {
	const unit = 1024
	if n < unit {
		return strconv.Itoa(n) + " B"
	}
	v, suffix := float64(n)/unit, "KiB"
	if n >= unit*unit {
		v, suffix = float64(n)/(unit*unit), "MiB"
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + suffix
}

// scanFinalizers returns the number of space-separated names in raw
// (repeats included) and the longest of them, in one pass without
// allocating.
func scanFinalizers(raw string) (count int, longest string) {
	for f := range strings.FieldsSeq(raw) {
		count++
		if len(f) > len(longest) {
			longest = f
		}
	}
	return count, longest
}

// smallFinalizerSet is the number of stored finalizers up to which
// addedFinalizer compares names pairwise instead of hashing them: no
// allocation, and few comparisons.
const smallFinalizerSet = 16

// addedFinalizer returns a finalizer named in raw but not in stored, and
// whether there is one. It takes time linear in the lengths of both.
func addedFinalizer(raw, stored string) (string, bool) {
	old := strings.Fields(stored)
	if len(old) <= smallFinalizerSet {
		for f := range strings.FieldsSeq(raw) {
			found := false
			for _, o := range old {
				if o == f {
					found = true
					break
				}
			}
			if !found {
				return f, true
			}
		}
		return "", false
	}
	set := make(map[string]struct{}, len(old))
	for _, o := range old {
		set[o] = struct{}{}
	}
	for f := range strings.FieldsSeq(raw) {
		if _, ok := set[f]; !ok {
			return f, true
		}
	}
	return "", false
}

// listBudget counts the encoded size of one List or ListByOwner response
// as it is filled, against the server's bounds (see DefaultMaxListBytes
// and DefaultMaxLargeLists). Call release when the response is built.
type listBudget struct {
	s      *Server
	ctx    context.Context
	method string // for the log of a refusal
	paged  bool   // the request asked for a page
	bytes  int
	slot   bool // holds a large-List slot
}

// add counts res, which the response would hold next. It reports false
// when a page is full (res goes on the next page: a page holds at least
// one resource), and fails when an unpaged response would be over the
// bound, or a large List finds no slot.
func (b *listBudget) add(res *pbresource.Resource) (bool, error) {
	n := fieldSize(1, resourceSize(res)) // ListResponse.resources, ListByOwnerResponse.resources
	if b.bytes+n > b.s.limits.listBytes {
		if !b.paged {
			return false, b.s.fail(b.method, nil, status.Errorf(codes.ResourceExhausted,
				"the answer would be over %s (server.Config.MaxListBytes): list in pages, with page_size (e.g. 1000) and then each next_page_token",
				formatBytes(b.s.limits.listBytes)))
		}
		if b.bytes > 0 {
			return false, nil
		}
	}
	b.bytes += n
	if b.bytes > b.s.limits.largeList && !b.slot {
		if err := b.s.acquireLargeList(b.ctx); err != nil {
			return false, b.s.fail(b.method, nil, err)
		}
		b.slot = true
	}
	return true, nil
}

// release gives back the large-List slot, if the response took one.
func (b *listBudget) release() {
	if b.slot {
		<-b.s.largeLists
		b.slot = false
	}
}

// acquireLargeList takes a large-List slot, waiting up to LargeListWait.
func (s *Server) acquireLargeList(ctx context.Context) error {
	select {
	case s.largeLists <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(s.limits.largeListWait)
	defer t.Stop()
	select {
	case s.largeLists <- struct{}{}:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return status.Errorf(codes.ResourceExhausted,
			"%d large Lists (over %s) are being answered already (server.Config.MaxLargeLists): retry later, or list in smaller pages (page_size)",
			cap(s.largeLists), formatBytes(s.limits.largeList))
	}
}
