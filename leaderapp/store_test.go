package leaderapp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The store holds at most its budget of keys and values: a write past it
// is refused whole and the store keeps what it had; an overwrite that
// shrinks a value always fits.
func TestStoreBudget(t *testing.T) {
	s := NewStore(100)
	ok, err := s.Apply("a", make([]byte, 60), Version{Seq: 1})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = s.Apply("b", make([]byte, 60), Version{Seq: 2})
	var full *FullError
	require.ErrorAs(t, err, &full)
	assert.Equal(t, FullError{Need: 61, Held: 61, Max: 100}, *full)
	_, _, has := s.Get("b")
	assert.False(t, has, "the refused write left nothing")
	ok, err = s.Apply("a", make([]byte, 10), Version{Seq: 3})
	require.NoError(t, err)
	require.True(t, ok, "a smaller value replaces a larger one")
	ok, err = s.Apply("b", make([]byte, 60), Version{Seq: 4})
	require.NoError(t, err)
	assert.True(t, ok, "the room it freed is used")
	ok, err = s.Apply("a", make([]byte, 1000), Version{Seq: 2})
	require.NoError(t, err)
	assert.False(t, ok, "an older write is ignored before the budget is asked")
}

// A leader whose store is full answers 507 with the reason, and serves on.
func TestFullStoreAnswers507(t *testing.T) {
	side := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"name":"a"}`)
	}))
	defer side.Close()
	// The sidecar always names this replica: a long Stale keeps it the
	// leader through a poll that a loaded machine delays.
	s, err := New(Config{Name: "a", Sidecar: side.URL, Peers: map[string]string{"a": "http://127.0.0.1:1"}, Secret: secret,
		Poll: 10 * time.Millisecond, Stale: time.Minute, MaxStoreBytes: 1 << 20})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	require.Eventually(t, func() bool { k, _ := s.Role(); return k == Leader }, 10*time.Second, 5*time.Millisecond)
	app := httptest.NewServer(s.Handler())
	defer app.Close()
	val := strings.Repeat("x", 600<<10)
	assert.Equal(t, http.StatusNoContent, put(t, app.URL, "one", val).StatusCode)
	resp, err := http.DefaultClient.Do(must(http.NewRequest(http.MethodPut, app.URL+"/kv/two", strings.NewReader(val))))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode)
	assert.Contains(t, string(b), "store full")
	code, got := get(t, app.URL, "one")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, val, got, "the last good state survives")

	_, err = New(Config{Name: "a", Sidecar: side.URL, Peers: map[string]string{"a": "x"}, Secret: secret, MaxStoreBytes: -1})
	assert.ErrorContains(t, err, "store budget")
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}
