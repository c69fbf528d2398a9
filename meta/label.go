package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// LabelSize is the size of a namespace label: the first 4 KiB of the
// namespace, inside its slot 0.
const LabelSize = 4096

// Label errors, tested with errors.Is.
var (
	// ErrNoLabel: the label block is all zeros (a fresh namespace).
	ErrNoLabel = errors.New("namespace has no nvstripe label")
	// ErrLabelMismatch: the namespace carries another label, a corrupt one,
	// or other data; it must not be used or overwritten.
	ErrLabelMismatch = errors.New("namespace label does not match")
)

// Label identifies a namespace as part of a cluster. It is written at byte 0
// of every namespace when it is added, and checked whenever it is opened.
//
// Wire format (LabelSize bytes, integers little-endian):
//
//	off  len  field
//	  0    8  magic "NVSTRIPE"
//	  8    4  label format version, 1
//	 12    4  zero
//	 16    8  slot size in bytes
//	 24    2  length of the cluster id (1-64)
//	 26   64  cluster id, zero padded
//	 90    2  length of the namespace id (1-64)
//	 92   64  namespace id, zero padded
//	156 3936  zero
//	4092   4  CRC32C (Castagnoli) of bytes 0-4091
type Label struct {
	ClusterID string // ClusterRecord.ID
	Namespace string // NamespaceRecord.ID
	SlotSize  int64
}

const (
	labelMagic   = "NVSTRIPE"
	labelVersion = 1
	labelIDMax   = 64
	labelCRCOff  = LabelSize - 4
)

// Label returns the label the namespace must carry in this cluster.
func (c *ClusterRecord) Label(namespace string) Label {
	return Label{ClusterID: c.ID, Namespace: namespace, SlotSize: c.SlotSize}
}

// check says why l cannot be a label (nil when it can): both ids are names
// (checkName, as every cluster and namespace id is) and the slot size is
// positive. The encoder refuses such a label and the decoder reads one as
// a mismatch, so that whatever decodes is what some build could write.
func (l Label) check() error {
	if err := checkName("cluster id", l.ClusterID); err != nil {
		return err
	}
	if err := checkName("namespace id", l.Namespace); err != nil {
		return err
	}
	if l.SlotSize <= 0 {
		return fmt.Errorf("slot size %d: must be positive: %w", l.SlotSize, ErrInvalid)
	}
	return nil
}

// EncodeLabel returns the LabelSize bytes of l.
func EncodeLabel(l Label) ([]byte, error) {
	if err := l.check(); err != nil {
		return nil, fmt.Errorf("label %+v: %w", l, err)
	}
	b := make([]byte, LabelSize)
	copy(b, labelMagic)
	binary.LittleEndian.PutUint32(b[8:], labelVersion)
	binary.LittleEndian.PutUint64(b[16:], uint64(l.SlotSize))
	binary.LittleEndian.PutUint16(b[24:], uint16(len(l.ClusterID)))
	copy(b[26:], l.ClusterID)
	binary.LittleEndian.PutUint16(b[90:], uint16(len(l.Namespace)))
	copy(b[92:], l.Namespace)
	binary.LittleEndian.PutUint32(b[labelCRCOff:], crc32.Checksum(b[:labelCRCOff], crc32.MakeTable(crc32.Castagnoli)))
	return b, nil
}

// DecodeLabel reads a label from the first LabelSize bytes of b. All zeros
// is ErrNoLabel; anything else that is not a valid label (other data, a bad
// checksum, an unknown version, ids that are not names or a slot size that
// is not positive) is ErrLabelMismatch.
func DecodeLabel(b []byte) (Label, error) {
	if len(b) < LabelSize {
		return Label{}, fmt.Errorf("label needs %d bytes, got %d: %w", LabelSize, len(b), ErrInvalid)
	}
	b = b[:LabelSize]
	if bytes.Equal(b, make([]byte, LabelSize)) {
		return Label{}, ErrNoLabel
	}
	if string(b[:8]) != labelMagic {
		return Label{}, fmt.Errorf("%w: the namespace holds other data, not an nvstripe label (refusing to use or overwrite it)", ErrLabelMismatch)
	}
	if got, want := binary.LittleEndian.Uint32(b[labelCRCOff:]), crc32.Checksum(b[:labelCRCOff], crc32.MakeTable(crc32.Castagnoli)); got != want {
		return Label{}, fmt.Errorf("%w: label checksum %08x, computed %08x (corrupt label)", ErrLabelMismatch, got, want)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != labelVersion {
		return Label{}, fmt.Errorf("%w: label format version %d, this build reads %d", ErrLabelMismatch, v, labelVersion)
	}
	cl, nl := int(binary.LittleEndian.Uint16(b[24:])), int(binary.LittleEndian.Uint16(b[90:]))
	if cl < 1 || cl > labelIDMax || nl < 1 || nl > labelIDMax {
		return Label{}, fmt.Errorf("%w: label id lengths %d and %d out of range", ErrLabelMismatch, cl, nl)
	}
	l := Label{
		ClusterID: string(b[26 : 26+cl]),
		Namespace: string(b[92 : 92+nl]),
		SlotSize:  int64(binary.LittleEndian.Uint64(b[16:])),
	}
	if err := l.check(); err != nil {
		return Label{}, fmt.Errorf("%w: not a label any build writes (%s)", ErrLabelMismatch, err.Error())
	}
	return l, nil
}

// CheckLabel decodes the label in b and compares it with want. It returns
// nil when they match, ErrNoLabel for a blank namespace (the caller may write
// want there if it is adding the namespace), and ErrLabelMismatch, saying
// what differs, otherwise.
func CheckLabel(b []byte, want Label) error {
	got, err := DecodeLabel(b)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: the namespace says cluster %s, namespace %s, slot size %d; etcd says cluster %s, namespace %s, slot size %d (it belongs to another cluster or namespace record; refusing to use it)",
			ErrLabelMismatch, got.ClusterID, got.Namespace, got.SlotSize, want.ClusterID, want.Namespace, want.SlotSize)
	}
	return nil
}

// IsLabelBlock says whether b starts as a label does (the magic): an
// nvstripe label, perhaps a corrupt one, rather than zeros or other data.
func IsLabelBlock(b []byte) bool {
	return len(b) >= len(labelMagic) && string(b[:len(labelMagic)]) == labelMagic
}
