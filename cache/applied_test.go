package cache_test

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notes records the waits that are over, in order.
type notes struct {
	mu   sync.Mutex
	over []*cache.AppliedWait
}

func (n *notes) Applied(w *cache.AppliedWait) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.over = append(n.over, w)
}

func (n *notes) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.over)
}

// applied returns the progress of typ in c.
func applied(t *testing.T, c *cache.Cache, typ *pbresource.Type) *cache.Applied {
	t.Helper()
	a, err := c.Applied(typ)
	require.NoError(t, err)
	return a
}

func TestAppliedOnlyGrows(t *testing.T) {
	c := newCache(t)
	albums := applied(t, c, albumType)
	require.Zero(t, albums.Version())

	albums.Mark(7)
	albums.Mark(5)
	require.Equal(t, uint64(7), albums.Version())

	// Per type, and any GroupVersion of it.
	require.Zero(t, applied(t, c, artistType).Version())
	v2 := &pbresource.Type{Group: albumType.Group, GroupVersion: "v2", Kind: albumType.Kind}
	require.Same(t, albums, applied(t, c, v2))

	_, err := c.Applied(&pbresource.Type{Group: "music", GroupVersion: "v1", Kind: "Song"})
	require.ErrorContains(t, err, "does not hold type music.v1.Song")
}

func TestWaitEndsInVersionOrder(t *testing.T) {
	c := newCache(t)
	albums := applied(t, c, albumType)
	albums.Mark(10)
	n := &notes{}

	var done cache.AppliedWait
	require.False(t, albums.Wait(&done, 10, n), "version 10 is applied already")

	waits := make([]cache.AppliedWait, 5)
	for i, v := range []uint64{15, 12, 30, 12, 20} {
		require.True(t, albums.Wait(&waits[i], v, n))
	}
	// Another type's progress ends none of them.
	applied(t, c, artistType).Mark(100)
	require.Zero(t, n.count())

	albums.Mark(11)
	require.Zero(t, n.count())
	albums.Mark(16)
	require.Equal(t, []*cache.AppliedWait{&waits[1], &waits[3], &waits[0]}, sortSame(n.over, &waits[1], &waits[3]))
	albums.Mark(25)
	require.Len(t, n.over, 4)
	require.Same(t, &waits[4], n.over[3])

	require.True(t, waits[2].Cancel(), "version 30 was not reached")
	require.False(t, waits[2].Cancel(), "cancelled already")
	require.False(t, waits[0].Cancel(), "over already")
	albums.Mark(40)
	require.Len(t, n.over, 4, "a cancelled wait is not told")
	require.False(t, (&cache.AppliedWait{}).Cancel(), "a wait never started")
}

// sortSame returns over with its two first entries in the order a, b when
// they are a and b in either order: waits for the same version end in no
// particular order.
func sortSame(over []*cache.AppliedWait, a, b *cache.AppliedWait) []*cache.AppliedWait {
	out := append([]*cache.AppliedWait(nil), over...)
	if len(out) >= 2 && out[0] == b && out[1] == a {
		out[0], out[1] = a, b
	}
	return out
}

// TestWaitRandom starts and cancels waits at random and checks that each
// ends exactly when its version is applied.
func TestWaitRandom(t *testing.T) {
	albums := applied(t, newCache(t), albumType)
	rng := rand.New(rand.NewSource(1))
	n := &notes{}
	waits := make([]cache.AppliedWait, 500)
	version := make([]uint64, len(waits))
	cancelled := make([]bool, len(waits))
	for i := range waits {
		version[i] = uint64(1 + rng.Intn(1000))
		require.True(t, albums.Wait(&waits[i], version[i], n))
	}
	for i := range waits {
		if rng.Intn(3) == 0 {
			require.True(t, waits[i].Cancel())
			cancelled[i] = true
		}
	}
	for at := uint64(0); at <= 1000; at += uint64(1 + rng.Intn(50)) {
		albums.Mark(at)
		for _, w := range n.over {
			i := indexOfWait(waits, w)
			require.False(t, cancelled[i], "wait %d was cancelled", i)
			require.LessOrEqual(t, version[i], at)
		}
		for i := range waits {
			if !cancelled[i] && version[i] <= at {
				require.False(t, waits[i].Cancel(), "wait %d for %d still waits at %d", i, version[i], at)
			}
		}
	}
	albums.Mark(1000)
	want := 0
	for i := range waits {
		if !cancelled[i] {
			want++
		}
	}
	require.Equal(t, want, n.count())
}

func indexOfWait(waits []cache.AppliedWait, w *cache.AppliedWait) int {
	for i := range waits {
		if &waits[i] == w {
			return i
		}
	}
	return -1
}

// TestWaitConcurrent races waits against the versions that end them:
// every wait ends, exactly once, and never early.
func TestWaitConcurrent(t *testing.T) {
	albums := applied(t, newCache(t), albumType)
	const waiters, perWaiter, top = 4, 500, 2000
	n := &checkedNotes{albums: albums, t: t}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := uint64(1); v <= top; v++ {
			albums.Mark(v)
		}
	}()
	var started sync.Map
	for g := 0; g < waiters; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < perWaiter; i++ {
				w := &cache.AppliedWait{}
				v := uint64(1 + rng.Intn(top))
				n.versions.Store(w, v)
				if albums.Wait(w, v, n) {
					started.Store(w, true)
				}
			}
		}(g)
	}
	wg.Wait()
	count := 0
	started.Range(func(k, _ any) bool {
		count++
		_, told := n.told.Load(k)
		require.True(t, told, "a wait never ended")
		return true
	})
	require.Equal(t, count, int(n.total.Load()))
}

// checkedNotes checks, when told, that the wait's version is applied and
// that it is told once.
type checkedNotes struct {
	albums   *cache.Applied
	t        *testing.T
	versions sync.Map // *AppliedWait → uint64
	told     sync.Map
	total    atomic.Int64
}

func (n *checkedNotes) Applied(w *cache.AppliedWait) {
	v, _ := n.versions.Load(w)
	assert.GreaterOrEqual(n.t, n.albums.Version(), v.(uint64))
	_, again := n.told.LoadOrStore(w, true)
	assert.False(n.t, again, "a wait was told twice")
	n.total.Add(1)
}

// TestWaitAgain: a wait cancelled and started again, for another version,
// ends once, at its new version, whatever its old entry; many cancelled
// waits are dropped without ending.
func TestWaitAgain(t *testing.T) {
	albums := applied(t, newCache(t), albumType)
	n := &notes{}
	var w cache.AppliedWait
	require.True(t, albums.Wait(&w, 50, n))
	require.True(t, w.Cancel())
	require.True(t, albums.Wait(&w, 20, n))
	albums.Mark(30)
	require.Equal(t, []*cache.AppliedWait{&w}, n.over)
	albums.Mark(60) // the first wait's stale entry
	require.Len(t, n.over, 1)

	// Out of order, and most of them cancelled.
	waits := make([]cache.AppliedWait, 100)
	for i := range waits {
		require.True(t, albums.Wait(&waits[i], uint64(200-i), n))
	}
	for i := range waits[:80] {
		require.True(t, waits[i].Cancel())
	}
	albums.Mark(1000)
	require.Len(t, n.over, 21)
	for _, w := range n.over[1:] {
		require.GreaterOrEqual(t, indexOfWait(waits, w), 80)
	}
	// Over, in version order.
	require.Same(t, &waits[99], n.over[1])
	require.Same(t, &waits[80], n.over[20])
}
