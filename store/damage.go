package store

// checkFile runs before Open hands the file to bbolt, which faults fatally (SIGBUS,
// SIGSEGV: no recover) on a file cut short or with broken meta pages, and silently
// initialises a 0-byte file. See checkBoltFile.
func checkFile(path string) error { return checkBoltFile(path) }
