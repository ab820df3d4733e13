package localstate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's file format (version 2), as far as precheck reads it: two meta
// pages at the start, each a 16-byte page header and the meta (magic,
// version, page size, flags, the root bucket, the freelist's page, the
// high-water page id, the transaction id, and an FNV-64a checksum of the
// meta before the checksum), little-endian on every platform linegate
// builds for.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	metaChecksumAt   = 56 // bytes of the meta the checksum covers
	metaSize         = 64
	freelistPageFlag = 0x10
	noFreelist       = ^uint64(0)
)

// boltMeta is what precheck reads of a meta page.
type boltMeta struct {
	pageSize       uint32
	freelist, pgid uint64
	txid           uint64
	valid          bool
	invalidBecause string
}

// precheck reads the meta pages of the database file f (size bytes) the way
// bbolt chooses between them, and checks what bbolt would otherwise find
// out by panicking inside Open (where the mapping it made keeps the file,
// and its lock, held): that the file holds every page the database says it
// has, and that the freelist's page is one. It reads with plain reads, no
// mapping. The tree itself is checked after Open (checkWhole).
func precheck(f io.ReaderAt, size int64) error {
	var metas [2]boltMeta
	metas[0] = readMeta(f, 0)
	pageSize := int64(4096)
	if metas[0].valid {
		pageSize = int64(metas[0].pageSize)
	}
	metas[1] = readMeta(f, pageSize)
	m := metas[0]
	if !m.valid || metas[1].valid && metas[1].txid > m.txid {
		m = metas[1]
	}
	if !m.valid {
		return fmt.Errorf("neither meta page is valid (%s; %s)", metas[0].invalidBecause, metas[1].invalidBecause)
	}
	if need := int64(m.pgid) * int64(m.pageSize); size < need {
		return fmt.Errorf("%d bytes of the %d its pages take: truncated", size, need)
	}
	if m.freelist == noFreelist {
		return nil
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return fmt.Errorf("freelist page %d outside the database's %d pages", m.freelist, m.pgid)
	}
	var hdr [pageHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], int64(m.freelist)*int64(m.pageSize)); err != nil {
		return fmt.Errorf("freelist page %d: %w", m.freelist, err)
	}
	id, flags, overflow := binary.LittleEndian.Uint64(hdr[0:]), binary.LittleEndian.Uint16(hdr[8:]), binary.LittleEndian.Uint32(hdr[12:])
	if id != m.freelist || flags&freelistPageFlag == 0 {
		return fmt.Errorf("page %d is not the freelist it should be (id %d, flags %#x)", m.freelist, id, flags)
	}
	if end := (int64(m.freelist) + int64(overflow) + 1) * int64(m.pageSize); end > size {
		return fmt.Errorf("the freelist ends at byte %d of %d: truncated", end, size)
	}
	return nil
}

// readMeta reads the meta page at off.
func readMeta(f io.ReaderAt, off int64) boltMeta {
	var b [pageHeaderSize + metaSize]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		if errors.Is(err, io.EOF) {
			return boltMeta{invalidBecause: fmt.Sprintf("no meta page at byte %d", off)}
		}
		return boltMeta{invalidBecause: err.Error()}
	}
	meta := b[pageHeaderSize:]
	m := boltMeta{
		pageSize: binary.LittleEndian.Uint32(meta[8:]),
		freelist: binary.LittleEndian.Uint64(meta[32:]),
		pgid:     binary.LittleEndian.Uint64(meta[40:]),
		txid:     binary.LittleEndian.Uint64(meta[48:]),
	}
	h := fnv.New64a()
	_, _ = h.Write(meta[:metaChecksumAt])
	switch {
	case binary.LittleEndian.Uint32(meta[0:]) != boltMagic:
		m.invalidBecause = fmt.Sprintf("no bbolt magic at byte %d", off)
	case binary.LittleEndian.Uint32(meta[4:]) != boltVersion:
		m.invalidBecause = fmt.Sprintf("bbolt version %d at byte %d", binary.LittleEndian.Uint32(meta[4:]), off)
	case h.Sum64() != binary.LittleEndian.Uint64(meta[metaChecksumAt:]):
		m.invalidBecause = fmt.Sprintf("the meta page at byte %d fails its checksum", off)
	case m.pageSize < 512 || m.pageSize&(m.pageSize-1) != 0:
		m.invalidBecause = fmt.Sprintf("page size %d at byte %d", m.pageSize, off)
	default:
		m.valid = true
	}
	return m
}

// precheckFile is precheck of the file at path; a file that does not exist
// yet is fine (bbolt creates it).
func precheckFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("localstate: open %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("localstate: %s: %w", path, err)
	}
	if err := precheck(f, info.Size()); err != nil {
		return damaged(path, err)
	}
	return nil
}
