package leaderapp

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fencing replica's apply on any sequence and term headers: taken (204)
// exactly when the sequence is a positive integer and the term a
// non-negative one no older than the fence; then the store holds a
// version at least as new and the fence is at least the term. Anything
// else leaves the store and the fence as they were, and nothing is ever
// a server error.
func FuzzFencedApply(f *testing.F) {
	f.Add("1", "0", uint64(0), "v")
	f.Add("7", "3", uint64(4), "stale")
	f.Add("18446744073709551615", "9223372036854775807", uint64(1), "")
	f.Add("0", "-1", uint64(0), "x")
	f.Add(" 5", "+2", uint64(0), "x")
	f.Fuzz(func(t *testing.T, seqH, termH string, fence uint64, val string) {
		if strings.ContainsAny(seqH+termH, "\r\n\x00") {
			return // not a header net/http would deliver
		}
		s, err := New(Config{Name: "a", Sidecar: "http://127.0.0.1:1", Peers: map[string]string{"a": "http://a", "b": "http://b"},
			Secret: "0123456789abcdef", Fencing: true})
		require.NoError(t, err)
		require.NoError(t, s.fence.Admit(fence))
		req := httptest.NewRequest(http.MethodPut, "/internal/apply/k", strings.NewReader(val))
		req.Header.Set(HeaderSecret, "0123456789abcdef")
		req.Header.Set(HeaderLeader, "b")
		req.Header.Set(HeaderSeq, seqH)
		req.Header.Set(HeaderTerm, termH)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)

		seq, serr := strconv.ParseUint(seqH, 10, 64)
		term, terr := strconv.ParseInt(termH, 10, 64)
		want := serr == nil && seq > 0 && terr == nil && term >= 0 && uint64(term) >= fence
		assert.Less(t, rec.Code, 500, "%q %q", seqH, termH)
		_, ver, held := s.store.Get("k")
		if want {
			assert.Equal(t, http.StatusNoContent, rec.Code, "%q %q: %s", seqH, termH, rec.Body)
			assert.True(t, held)
			assert.False(t, ver.Less(Version{Term: uint64(term), Seq: seq}))
			assert.GreaterOrEqual(t, s.fence.Newest(), uint64(term))
			return
		}
		assert.NotEqual(t, http.StatusNoContent, rec.Code, "%q %q", seqH, termH)
		assert.False(t, held, "a refused write is not stored")
		assert.Equal(t, fence, s.fence.Newest(), "a refused write moves no fence")
		if rec.Code == http.StatusConflict {
			assert.Equal(t, strconv.FormatUint(fence, 10), rec.Header().Get(HeaderFence))
		}
	})
}
