package server

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ringside/ringside/ring/kv"
)

// Item is one key's entry in a data move.
type Item struct {
	Key string
	kv.Entry
}

// A transfer body is a sequence of records, big-endian:
//
//	u32 key length, key, u64 version, u8 deleted (0/1), u32 value length, value

// AppendItem appends one transfer record to b.
func AppendItem(b []byte, it Item) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(it.Key)))
	b = append(b, it.Key...)
	b = binary.BigEndian.AppendUint64(b, it.Version)
	del := byte(0)
	if it.Deleted {
		del = 1
	}
	b = append(b, del)
	b = binary.BigEndian.AppendUint32(b, uint32(len(it.Value)))
	return append(b, it.Value...)
}

var errTransfer = errors.New("malformed transfer")

// DecodeItems parses a transfer body.
func DecodeItems(b []byte) ([]Item, error) {
	var out []Item
	for n := 0; len(b) > 0; n++ {
		take := func(k int, what string) ([]byte, error) {
			if len(b) < k {
				return nil, fmt.Errorf("%w: record %d: %s needs %d bytes, %d left", errTransfer, n, what, k, len(b))
			}
			v := b[:k]
			b = b[k:]
			return v, nil
		}
		h, err := take(4, "key length")
		if err != nil {
			return nil, err
		}
		klen := binary.BigEndian.Uint32(h)
		if klen == 0 || klen > kv.MaxKeyLen {
			return nil, fmt.Errorf("%w: record %d: key length %d outside 1…%d", errTransfer, n, klen, kv.MaxKeyLen)
		}
		key, err := take(int(klen), "key")
		if err != nil {
			return nil, err
		}
		vh, err := take(13, "version, flag and value length")
		if err != nil {
			return nil, err
		}
		it := Item{Key: string(key)}
		it.Version = binary.BigEndian.Uint64(vh)
		if it.Version == 0 {
			return nil, fmt.Errorf("%w: record %d: version 0", errTransfer, n)
		}
		switch vh[8] {
		case 0:
		case 1:
			it.Deleted = true
		default:
			return nil, fmt.Errorf("%w: record %d: deleted flag %d", errTransfer, n, vh[8])
		}
		vlen := binary.BigEndian.Uint32(vh[9:])
		if vlen > kv.MaxValueLen {
			return nil, fmt.Errorf("%w: record %d: value length %d over %d", errTransfer, n, vlen, kv.MaxValueLen)
		}
		v, err := take(int(vlen), "value")
		if err != nil {
			return nil, err
		}
		it.Value = v
		out = append(out, it)
	}
	return out, nil
}
