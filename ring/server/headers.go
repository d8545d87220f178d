package server

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ringside/ringside/ring"
	"github.com/ringside/ringside/ring/membership"
)

// The peer protocol's small inputs, read as strictly as a client's: a
// peer's header or body is refused with a message naming it, never
// half-read.

// parseVersion reads an X-Ringside-Version: a positive decimal number.
func parseVersion(v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%s: %q is not a positive version", HeaderVersion, v)
	}
	return n, nil
}

// parseEpoch reads an X-Ringside-Epoch: the sender's metadata as
// round.version, two decimal numbers and nothing else (fmt.Sscanf, used
// before, took "1.2 and more" as 1.2).
func parseEpoch(v string) (round, version uint64, err error) {
	r, ver, ok := strings.Cut(v, ".")
	if ok {
		if round, err = strconv.ParseUint(r, 10, 64); err == nil {
			version, err = strconv.ParseUint(ver, 10, 64)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%s %q: want the sender's metadata round.version", HeaderEpoch, v)
	}
	return round, version, nil
}

// decodeJoin reads a join request: one JSON object and nothing after it,
// at most 4 KiB, naming a valid server address.
func decodeJoin(body io.Reader) (joinRequest, error) {
	var req joinRequest
	dec := json.NewDecoder(io.LimitReader(body, 4096))
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("body: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, fmt.Errorf("body: more than one JSON object, or over 4 KiB")
	}
	if err := membership.CheckAddr(req.Addr); err != nil {
		return req, fmt.Errorf("addr: %w", err)
	}
	if req.Election == "" {
		req.Election = ring.ChangRoberts
	}
	if _, err := ring.Lookup(req.Election); err != nil {
		return req, fmt.Errorf("election: %w", err)
	}
	return req, nil
}
