package layout

import (
	"time"

	"go.etcd.io/bbolt"
)

// keyScrub, under the "ctxstore" bucket, says a scrub is owed: set in the
// transaction of an erase, removed once the erased bytes are zeroed
// everywhere. A process killed in between leaves it set, and the next
// open that may write finishes the scrub.
const keyScrub = "scrub"

// MarkScrub records in tx that a scrub is owed.
func MarkScrub(tx *bbolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists([]byte(BucketStore))
	if err != nil {
		return err
	}
	return b.Put([]byte(keyScrub), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
}

// ScrubOwed reports whether an erase's scrub was left unfinished.
func ScrubOwed(tx *bbolt.Tx) bool {
	b := tx.Bucket([]byte(BucketStore))
	return b != nil && b.Get([]byte(keyScrub)) != nil
}

// ScrubDone records in tx that the scrub owed is done.
func ScrubDone(tx *bbolt.Tx) error {
	if b := tx.Bucket([]byte(BucketStore)); b != nil {
		return b.Delete([]byte(keyScrub))
	}
	return nil
}
