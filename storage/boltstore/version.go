package boltstore

import "github.com/ctxstore/ctxstore/storage/boltstore/internal/layout"

// FormatVersion is the version of the file layout this build writes and reads
// (stored in the file under "ctxstore"/"format"). A file of a newer version is
// refused with ErrNewerFormat; an older one is migrated when opened for writing.
const FormatVersion = layout.FormatVersion
