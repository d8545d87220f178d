package kv

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// The log is a sequence of records:
//
//	crc32(IEEE, of everything after it) | flags | version u64 | key len u32 | value len u32 | key | value
//
// big-endian. A record is valid when its lengths are within the limits,
// its bytes are all there and its checksum matches.

// replay reads records from the start of the log into the index until the
// first one that is not valid, and cuts the log there.
func (s *Store) replay() error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, 0, size), 1<<20)
	var off int64
	hdr := make([]byte, headerLen)
	var reason string
	for off < size {
		rec, why := readRecord(r, hdr)
		if why != "" {
			reason = why
			break
		}
		if old, ok := s.index[rec.key]; ok {
			s.garbage += old.size(rec.key)
		}
		switch {
		case rec.flags&flagForget != 0:
			delete(s.index, rec.key)
			s.garbage += rec.size()
		default:
			s.index[rec.key] = loc{off: off + headerLen + int64(len(rec.key)), vlen: uint32(len(rec.value)), version: rec.version, deleted: rec.flags&flagDelete != 0}
		}
		off += rec.size()
	}
	if off < size {
		if err := s.cut(off, size, reason); err != nil {
			return err
		}
	}
	s.end = off
	return nil
}

type record struct {
	flags   byte
	version uint64
	key     string
	value   []byte
}

func (r record) size() int64 { return int64(headerLen + len(r.key) + len(r.value)) }

// readRecord reads one record; why says what is wrong with it, "" when it
// is valid.
func readRecord(r io.Reader, hdr []byte) (record, string) {
	if _, err := io.ReadFull(r, hdr); err != nil {
		return record{}, "a torn record header"
	}
	klen, vlen := binary.BigEndian.Uint32(hdr[13:]), binary.BigEndian.Uint32(hdr[17:])
	if klen > MaxKeyLen || vlen > MaxValueLen {
		return record{}, fmt.Sprintf("a header claiming a %d-byte key and a %d-byte value (garbage)", klen, vlen)
	}
	body := make([]byte, int(klen)+int(vlen))
	if _, err := io.ReadFull(r, body); err != nil {
		return record{}, "a torn record"
	}
	crc := crc32.ChecksumIEEE(hdr[4:])
	if crc32.Update(crc, crc32.IEEETable, body) != binary.BigEndian.Uint32(hdr) {
		return record{}, "a checksum mismatch"
	}
	return record{flags: hdr[4], version: binary.BigEndian.Uint64(hdr[5:]), key: string(body[:klen]), value: body[klen:]}, ""
}

// cut saves the log's bytes from off to size beside it and truncates the
// log to off, so the bytes are kept for a look but never misread. The
// side file is durable — its contents and its name — before the log
// loses the bytes, and a later cut at the same offset gets a file of its
// own instead of overwriting it.
func (s *Store) cut(off, size int64, reason string) error {
	out, side, err := createSide(s.path + ".cut-" + strconv.FormatInt(off, 10))
	if err != nil {
		return fmt.Errorf("save the cut tail: %w", err)
	}
	_, err = io.Copy(out, io.NewSectionReader(s.f, off, size-off))
	if err == nil {
		err = s.fsync(out)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.syncDir(dirOf(s.path))
	}
	if err != nil {
		return fmt.Errorf("save the cut tail to %s: %w", side, err)
	}
	if err := s.f.Truncate(off); err != nil {
		return fmt.Errorf("cut the log at %d: %w", off, err)
	}
	if err := s.fsync(s.f); err != nil {
		return fmt.Errorf("cut the log at %d: %w", off, err)
	}
	s.log.Warn("cut the store's log after its last valid record", "log", s.path, "at", off, "bytes_cut", size-off, "found", reason, "saved_to", side)
	return nil
}

// createSide creates base, or base.1, base.2, … when it exists: a file
// that did not exist before.
func createSide(base string) (*os.File, string, error) {
	name := base
	for i := 1; ; i++ {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) || i > 1000 {
			return f, name, err
		}
		name = base + "." + strconv.Itoa(i)
	}
}

// append writes one record at the end and returns the offset of its value.
// A write that fails is cut off again, so the next record starts where
// this one did and a short successful write cannot leave the rest of a
// longer failed one after it.
func (s *Store) append(flags byte, version uint64, key string, value []byte) (int64, error) {
	s.buf = encodeRecord(s.buf[:0], flags, version, key, value)
	b, n := s.buf, len(s.buf)
	if _, err := s.f.WriteAt(b, s.end); err != nil {
		if terr := s.f.Truncate(s.end); terr != nil {
			err = errors.Join(err, fmt.Errorf("and cutting it off: %w", terr))
		}
		return 0, fmt.Errorf("append: %w", err)
	}
	switch s.opts.Fsync {
	case FsyncAlways:
		if err := s.sync(); err != nil {
			// The record must not outlive the error it was answered
			// with: cut it off again (from the OS's cache at least).
			if terr := s.f.Truncate(s.end); terr != nil {
				err = errors.Join(err, fmt.Errorf("and cutting it off: %w", terr))
			}
			return 0, fmt.Errorf("fsync: %w", err)
		}
	case FsyncInterval:
		s.dirty = true
	}
	off := s.end + int64(headerLen+len(key))
	s.end += int64(n)
	return off, nil
}

// encodeRecord appends one record to b.
func encodeRecord(b []byte, flags byte, version uint64, key string, value []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, flags)
	b = binary.BigEndian.AppendUint64(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(len(key)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	b = append(b, key...)
	b = append(b, value...)
	binary.BigEndian.PutUint32(b[start:], crc32.ChecksumIEEE(b[start+4:]))
	return b
}

// syncLoop is the interval policy's background fsync.
func (s *Store) syncLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.FsyncEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.dirty && s.f != nil {
			if err := s.sync(); err != nil {
				s.log.Error("fsync of the store's log failed", "log", s.path, "err", err)
			} else {
				s.dirty = false
			}
		}
		s.mu.Unlock()
	}
}

// maybeCompact rewrites the log when superseded records pass the
// threshold and make up half of it. After a failure (a full disk) it waits
// until the garbage has grown by half again instead of rewriting the log
// at every write. Write lock held.
func (s *Store) maybeCompact() {
	if s.opts.CompactAt < 0 || s.garbage < max(s.opts.CompactAt, s.compactRetry) || 2*s.garbage < s.end {
		return
	}
	if err := s.compact(); err != nil {
		// The old log is intact and in use.
		s.compactRetry = s.garbage + s.garbage/2
		s.log.Error("compacting the store's log failed; retrying once its garbage has grown by half", "log", s.path, "err", err, "garbage_bytes", s.garbage)
		return
	}
	s.compactRetry = 0
}

// compact writes the live records (tombstones included, so deletes keep
// their versions) to a new file, makes it durable, and renames it over the
// log. Write lock held.
func (s *Store) compact() error {
	tmpPath := s.path + ".compact"
	tmp, err := os.Create(tmpPath)
	if err != nil {
		return err
	}
	old, oldEnd := s.f, s.end
	oldIndex := make(map[string]loc, len(s.index))
	for k, l := range s.index {
		oldIndex[k] = l
	}
	s.f, s.end = tmp, 0
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmpPath)
		s.f, s.end, s.index = old, oldEnd, oldIndex
		return err
	}
	for k, l := range oldIndex {
		var value []byte
		flags := byte(flagDelete)
		if !l.deleted {
			value = make([]byte, l.vlen)
			if _, err := old.ReadAt(value, l.off); err != nil {
				return fail(fmt.Errorf("read %q: %w", k, err))
			}
			flags = 0
		}
		saved := s.opts.Fsync
		s.opts.Fsync = FsyncNever // one fsync for the whole file, below
		off, err := s.append(flags, l.version, k, value)
		s.opts.Fsync = saved
		if err != nil {
			return fail(err)
		}
		l.off = off
		s.index[k] = l
	}
	if err := s.fsync(tmp); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmpPath, s.path); err != nil {
		return fail(err)
	}
	// Until the rename is durable, a power cut brings the old log back:
	// complete, but without what is written to the new one. sync makes
	// it durable before the next write is acknowledged.
	s.renamed = true
	if err := s.sync(); err != nil {
		s.log.Error("the compacted log's name is not yet durable; retried before the next write is acknowledged", "log", s.path, "err", err)
	}
	old.Close()
	before := oldEnd
	s.garbage, s.dirty = 0, false
	s.log.Info("compacted the store's log", "log", s.path, "bytes_before", before, "bytes_after", s.end, "keys", len(s.index))
	return nil
}

// sync makes the log durable: its bytes, and its name after a
// compaction renamed it.
func (s *Store) sync() error {
	if s.renamed {
		if err := s.syncDir(dirOf(s.path)); err != nil {
			return fmt.Errorf("fsync the log's directory: %w", err)
		}
		s.renamed = false
	}
	return s.fsync(s.f)
}

// syncDir makes the names in the folder dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[:i+1]
		}
	}
	return "."
}
