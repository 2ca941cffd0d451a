package resume

import (
	"context"
	"io"

	"github.com/ctxstore/ctxstore/storage"
)

// KindImport is the former name of KindIngest.
//
// Deprecated: use KindIngest.
const KindImport = KindIngest

// ImportOptions is the former name of IngestOptions.
//
// Deprecated: use IngestOptions.
type ImportOptions = IngestOptions

// ImportReport is the former name of IngestReport.
//
// Deprecated: use IngestReport.
type ImportReport = IngestReport

// ErrImportConflict is the former name of ErrIngestConflict.
//
// Deprecated: use ErrIngestConflict.
var ErrImportConflict = ErrIngestConflict

// ImportFile is the former name of IngestFile.
//
// Deprecated: use IngestFile.
func ImportFile(ctx context.Context, st storage.Engine, session, path string, opts IngestOptions) (IngestReport, error) {
	return IngestFile(ctx, st, session, path, opts)
}

// ImportJSONL is the former name of IngestJSONL.
//
// Deprecated: use IngestJSONL.
func ImportJSONL(ctx context.Context, st storage.Engine, session string, r io.Reader, opts IngestOptions) (IngestReport, error) {
	return IngestJSONL(ctx, st, session, r, opts)
}
