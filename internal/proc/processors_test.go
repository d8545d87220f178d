package proc

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOneProcessorKeepsTheCallersChoice(t *testing.T) {
	env := []string{"A=1"}
	t.Setenv("GOMAXPROCS", "3") // restored after the test
	assert.Equal(t, env, OneProcessor(env), "the caller set GOMAXPROCS: nothing added")

	os.Unsetenv("GOMAXPROCS")
	base := make([]string, 1, 4)
	base[0] = "A=1"
	got := OneProcessor(base)
	assert.Equal(t, []string{"A=1", "GOMAXPROCS=1"}, got)
	assert.Equal(t, []string{"A=1"}, base, "the caller's slice is not written")
	assert.Equal(t, "", base[:2][1], "nothing appended into the caller's spare capacity")
}
