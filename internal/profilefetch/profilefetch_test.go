package profilefetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSaveWritesTheBodyAndQuotesARefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Key") != "k" {
			http.Error(w, "no key", http.StatusForbidden)
			return
		}
		w.Write([]byte("profile"))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "p.pprof")
	require.NoError(t, Save(context.Background(), srv.URL, http.Header{"X-Key": {"k"}}, path))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "profile", string(got))

	other := filepath.Join(t.TempDir(), "q.pprof")
	err = Save(context.Background(), srv.URL, nil, other)
	assert.ErrorContains(t, err, "403 Forbidden: no key")
	assert.NoFileExists(t, other, "a refusal writes nothing")
}
