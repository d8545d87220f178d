package lbstack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nginx proxies to its upstreams from a folder given relative to the
// working directory, as make experiments gives its results folder.
func TestNginxFromARelativeFolder(t *testing.T) {
	require.NotEmpty(t, NginxBinary(), "nginx is not installed (apt-get install nginx)")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "upstream") }))
	defer up.Close()
	t.Chdir(t.TempDir())
	n, err := StartNginx(context.Background(), "results/.nginx", []string{strings.TrimPrefix(up.URL, "http://")}, []float64{1})
	require.NoError(t, err)
	defer n.Shutdown()
	resp, err := http.Get("http://" + n.Addr + "/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "upstream", string(b))
}
