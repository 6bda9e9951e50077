package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/podsync/podsync/engine/errdefs"
)

// A store file is checked before the store uses it, because bbolt trusts
// its file: it panics on some corrupt pages, and a file shorter than its
// meta page says is mapped past its end, where a read is a SIGBUS. Open
// checks a file that is not empty in three steps, none of which writes to
// it (it stays as it is, for forensics):
//
//  1. checkMeta reads the two meta pages with plain reads, as bbolt's Open
//     would pick one (the valid one with the higher transaction id), and
//     refuses a file with no valid meta page or shorter than the pages the
//     meta page counts; then no read of a reachable page can fault;
//  2. checkPages opens the file read-only and reads every page of every
//     bucket, decodes every pod record, and runs bbolt's own consistency
//     check (tx.Check), with panics and faults (debug.SetPanicOnFault)
//     turned into errors;
//  3. Open opens it for writing, its own panics turned into errors too.
//
// Every failure is an errdefs.ErrStoreCorrupt that says what was found.

// Layout of a bbolt meta page (go.etcd.io/bbolt/internal/common, format
// version 2): a 16-byte page header, then the meta fields, in the
// machine's byte order.
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	boltPageHeader     = 16
	boltMetaSize       = 64 // magic … txid, checksum
	boltMetaSumLen     = 56 // the checksum covers the fields before it
	boltNoFreelist     = ^uint64(0)
	boltFreelistFlag   = 0x10
	minBoltPageSize    = 1024
	maxCheckErrors     = 5
	defaultBoltPageLen = 4096
)

// boltMeta is a decoded meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// decodeMeta decodes the meta page in page (its header included), or says
// why it is not one.
func decodeMeta(page []byte) (boltMeta, error) {
	if len(page) < boltPageHeader+boltMetaSize {
		return boltMeta{}, fmt.Errorf("only %d bytes", len(page))
	}
	m := page[boltPageHeader : boltPageHeader+boltMetaSize]
	le := binary.NativeEndian
	switch magic, version := le.Uint32(m[0:]), le.Uint32(m[4:]); {
	case magic != boltMagic:
		return boltMeta{}, fmt.Errorf("no bbolt magic (found %#08x)", magic)
	case version != boltVersion:
		return boltMeta{}, fmt.Errorf("bbolt format version %d, want %d", version, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:boltMetaSumLen])
	if sum := le.Uint64(m[boltMetaSumLen:]); sum != h.Sum64() {
		return boltMeta{}, errors.New("checksum mismatch (the page was overwritten or zeroed)")
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// checkMeta checks the meta pages of the file f of size bytes.
func checkMeta(f io.ReaderAt, size int64) error {
	read := func(off int64) []byte {
		buf := make([]byte, defaultBoltPageLen)
		n, _ := f.ReadAt(buf, off)
		return buf[:n]
	}
	if size < 2*minBoltPageSize {
		return fmt.Errorf("the file is %d bytes, too short for bbolt's two meta pages", size)
	}
	m0, err0 := decodeMeta(read(0))
	// The second meta page is one page in; without a valid first one, try
	// each page size bbolt may have used, as bbolt's Open does.
	var (
		m1   boltMeta
		err1 = errors.New("not found")
	)
	if err0 == nil {
		m1, err1 = decodeMeta(read(int64(m0.pageSize)))
	} else {
		for ps := int64(minBoltPageSize); ps <= 1<<24 && ps < size-minBoltPageSize; ps <<= 1 {
			if m1, err1 = decodeMeta(read(ps)); err1 == nil {
				break
			}
		}
	}
	var m boltMeta
	switch {
	case err0 != nil && err1 != nil:
		return fmt.Errorf("no valid bbolt meta page (the file is %d bytes; first: %w; second: %w)", size, err0, err1)
	case err0 == nil && (err1 != nil || m0.txid >= m1.txid):
		m = m0
	default:
		m = m1
	}
	if m.pageSize < minBoltPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return fmt.Errorf("the meta page names a page size of %d bytes", m.pageSize)
	}
	if need := int64(m.pgid) * int64(m.pageSize); m.pgid > 1<<40 || size < need {
		return fmt.Errorf("truncated: the file is %d bytes, its meta page (transaction %d) counts %d pages of %d bytes (%d bytes)",
			size, m.txid, m.pgid, m.pageSize, need)
	}
	if m.root >= m.pgid || (m.freelist != boltNoFreelist && m.freelist >= m.pgid) {
		return fmt.Errorf("the meta page (transaction %d) points past the file's %d pages (root bucket page %d, freelist page %d)",
			m.txid, m.pgid, m.root, m.freelist)
	}
	if m.freelist != boltNoFreelist {
		return checkFreelist(f, m)
	}
	return nil
}

// checkFreelist checks the freelist page of m as bbolt's Open reads it,
// where a bad one panics with the file mapped, and a panic in Open cannot
// be cleaned up (the mapping keeps the file and its lock): the page's
// type, its length, and the page ids it lists (in [2, pgid), each once).
func checkFreelist(f io.ReaderAt, m boltMeta) error {
	ps := int64(m.pageSize)
	hdr := make([]byte, boltPageHeader+8)
	if _, err := f.ReadAt(hdr, int64(m.freelist)*ps); err != nil {
		return fmt.Errorf("freelist page %d: %w", m.freelist, err)
	}
	le := binary.NativeEndian
	flags, count, overflow := le.Uint16(hdr[8:]), uint64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:]))
	if flags != boltFreelistFlag {
		return fmt.Errorf("freelist page %d has page type %#x, not a freelist", m.freelist, flags)
	}
	idx := uint64(0)
	if count == 0xFFFF {
		idx, count = 1, le.Uint64(hdr[boltPageHeader:])
	}
	if m.freelist+overflow+1 > m.pgid || (idx+count)*8+boltPageHeader > (overflow+1)*uint64(ps) {
		return fmt.Errorf("freelist page %d lists %d pages in %d pages of the file's %d", m.freelist, count, overflow+1, m.pgid)
	}
	buf := make([]byte, count*8)
	if _, err := f.ReadAt(buf, int64(m.freelist)*ps+boltPageHeader+int64(idx)*8); err != nil {
		return fmt.Errorf("freelist page %d: %w", m.freelist, err)
	}
	seen := make(map[uint64]bool, count)
	for i := range count {
		id := le.Uint64(buf[i*8:])
		if id < 2 || id >= m.pgid || seen[id] {
			return fmt.Errorf("freelist page %d lists page %d (the file has %d pages), or twice", m.freelist, id, m.pgid)
		}
		seen[id] = true
	}
	return nil
}

// errPanicked is the error of a panic or fault in bbolt.
var errPanicked = errors.New("bbolt failed reading the file")

// guard runs fn with panics, and faults reading mapped memory, turned into
// errors: bbolt panics on some corrupt pages, and a read of a page the
// file no longer holds is a fault.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	return fn()
}

// checkFile checks the store file at path, which is not empty, without
// writing to it (see above). It returns an error wrapping ErrStoreCorrupt
// for a corrupt file, ErrStoreLocked when another process holds it.
func checkFile(path string, opts Options) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkMeta(f, fi.Size())
		if err != nil {
			err = fmt.Errorf("open store %s: %w: %w", path, errdefs.ErrStoreCorrupt, err)
		}
	}
	_ = f.Close()
	if err != nil {
		return err
	}
	if err := checkPages(path, opts); err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return openError(path, err)
		}
		if newer := (*newerSchemaError)(nil); errors.As(err, &newer) {
			return fmt.Errorf("open store %s: %w", path, err)
		}
		return fmt.Errorf("open store %s: %w: %w", path, errdefs.ErrStoreCorrupt, err)
	}
	return nil
}

// checkPages opens the file read-only and reads all of it (see above).
func checkPages(path string, opts Options) error {
	return guard(func() error {
		db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: opts.LockTimeout, PreLoadFreelist: true})
		if err != nil {
			return err
		}
		defer func() { _ = db.Close() }()
		if err := db.View(readAll); err != nil {
			return err
		}
		// bbolt's check runs in a goroutine of its own, where it recovers
		// its panics; it reads only pages readAll and Open have read,
		// which cannot fault now.
		return db.View(func(tx *bolt.Tx) error {
			var errs []string
			for err := range tx.Check() {
				if len(errs) < maxCheckErrors {
					errs = append(errs, err.Error())
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("bbolt's check: %s", strings.Join(errs, "; "))
			}
			return nil
		})
	})
}

// openBolt is bolt.Open that, when bbolt panics (the caller guards it),
// still closes the file bbolt opened, which releases its lock: bbolt
// returns no DB to close then.
func openBolt(path string, o *bolt.Options) (db *bolt.DB, err error) {
	var file *os.File
	o.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				_ = file.Close()
			}
			panic(r)
		}
	}()
	return bolt.Open(path, 0o600, o)
}

// readAll reads every key and value of every bucket, every pod record and
// the name index; pages are read to their last byte.
func readAll(tx *bolt.Tx) error {
	var sink byte
	touch := func(b []byte) {
		for i := 0; i < len(b); i += minBoltPageSize {
			sink ^= b[i]
		}
		if len(b) > 0 {
			sink ^= b[len(b)-1]
		}
	}
	var walk func(path string, b *bolt.Bucket) error
	walk = func(path string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			touch(k)
			if v == nil {
				nested := b.Bucket(k)
				if nested == nil {
					return fmt.Errorf("bucket %s: key %q is neither a value nor a bucket", path, k)
				}
				return walk(path+"/"+string(k), nested)
			}
			touch(v)
			return nil
		})
	}
	err := tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	if err != nil {
		return err
	}
	_ = sink
	if tx.Bucket(bucketMeta) == nil {
		// A file bbolt created but podsync never initialised (a crash
		// during the first Open) has no buckets at all: that is new.
		if tx.Bucket(bucketPods) != nil || tx.Bucket(bucketLog) != nil {
			return errors.New("the meta bucket is missing")
		}
		return nil
	}
	// A later podsync's records may not decode here: that is a newer
	// store, not a corrupt one.
	if v := getInt(tx.Bucket(bucketMeta), keySchema); v > schemaVersion {
		return &newerSchemaError{version: v}
	}
	pods, names, log := tx.Bucket(bucketPods), tx.Bucket(bucketNames), tx.Bucket(bucketLog)
	if pods == nil || names == nil || log == nil {
		return errors.New("a bucket is missing (pods, pod_names or log)")
	}
	if err := log.ForEach(func(k, v []byte) error {
		if len(k) != 8 || !json.Valid(v) {
			return fmt.Errorf("revision log entry %x does not decode", k)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := pods.ForEach(func(uid, data []byte) error {
		if _, err := decodeRecord(data); err != nil {
			return fmt.Errorf("pod uid %s: %w", uid, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if objects := tx.Bucket(bucketObjects); objects != nil {
		if err := objects.ForEach(func(k, data []byte) error {
			if _, err := decodeObject(data); err != nil {
				return fmt.Errorf("object %q: %w", k, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return names.ForEach(func(k, uid []byte) error {
		if pods.Get(uid) == nil {
			return fmt.Errorf("the name index names uid %s, which has no record", uid)
		}
		return nil
	})
}

// MoveAside renames the store file at path to path.corrupt-<now in UTC>
// (20260102T030405Z), keeping it for forensics, so that Open starts a new
// store there; it returns the new name. The caller must not hold the file
// open.
func MoveAside(path string, now time.Time) (string, error) {
	to := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	if _, err := os.Lstat(to); err == nil {
		return "", fmt.Errorf("move store %s aside: %s exists", path, to)
	}
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("move store %s aside: %w", path, err)
	}
	return to, nil
}
