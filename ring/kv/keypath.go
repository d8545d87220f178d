package kv

import (
	"net/url"
	"strings"
)

// EscapeKey is key as one URL path segment. A key is any bytes: every HTTP
// hop (client, forward, replication, internal read) escapes it this way,
// so "a?b" stays one key, "%zz" is a key rather than a broken escape, and
// "a/b" stays one segment. Dots are escaped too, because a path segment
// "." or ".." would be cleaned away by the server's router.
func EscapeKey(key string) string {
	return strings.ReplaceAll(url.PathEscape(key), ".", "%2E")
}
