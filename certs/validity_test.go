package certs_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/internal/testkit/testcerts"
)

// TestOutOfDateCertificateRefused: a certificate that has expired, or is
// not valid yet, makes no config; the error names the file and the
// certificate's validity window.
func TestOutOfDateCertificateRefused(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "ca")
	day := 24 * time.Hour
	from, until := time.Now().Add(-3*day).Truncate(time.Second), time.Now().Add(-day).Truncate(time.Second)
	for _, c := range []struct {
		name, want  string
		from, until time.Time
	}{
		{"expired", "has expired", from, until},
		{"early", "is not valid yet", from.Add(4 * day), until.Add(4 * day)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert, key := ca.LeafValid(t, c.name, c.from, c.until)
			files := certs.Files{Cert: write(t, filepath.Join(dir, c.name+".crt"), cert), Key: write(t, filepath.Join(dir, c.name+".key"), key)}
			_, err := certs.ServerConfig(files)
			require.Error(t, err)
			for _, part := range []string{files.Cert, c.want, c.from.UTC().Format(time.RFC3339), c.until.UTC().Format(time.RFC3339)} {
				assert.ErrorContains(t, err, part)
			}
			_, err = certs.ClientConfig(files)
			assert.ErrorContains(t, err, c.want, "a client's own certificate")
		})
	}
}

// TestOutOfDateCertificateNotReloaded: a certificate renewed with one that
// has expired is not taken; the one in force stays, and the error is
// reported.
func TestOutOfDateCertificateNotReloaded(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "ca")
	c1, k1 := ca.Leaf(t, "server-1")
	files := certs.Files{Cert: write(t, filepath.Join(dir, "tls.crt"), c1), Key: write(t, filepath.Join(dir, "tls.key"), k1)}
	var reloadErrs []error
	sc, err := certs.ServerConfig(files, certs.CheckEvery(0), certs.OnReloadError(func(err error) { reloadErrs = append(reloadErrs, err) }))
	require.NoError(t, err)
	cc, err := certs.ClientConfig(certs.Files{CA: write(t, filepath.Join(dir, "ca.crt"), ca.PEM)})
	require.NoError(t, err)

	c2, k2 := ca.LeafValid(t, "expired", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	write(t, files.Cert, c2)
	write(t, files.Key, k2)
	name, _, err := handshake(t, sc, cc)
	require.NoError(t, err)
	assert.Equal(t, "server-1", name)
	require.Len(t, reloadErrs, 1)
	assert.ErrorContains(t, reloadErrs[0], files.Cert)
	assert.ErrorContains(t, reloadErrs[0], "has expired")
	assert.ErrorContains(t, reloadErrs[0], "previous certificates stay in force")
}
