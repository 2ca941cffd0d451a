// Package boltpage reads a bbolt file page by page with bounds-checked reads,
// never through bbolt's memory map, so that a damaged file yields a list of
// what is wrong instead of a fault. It knows bbolt's on-disk format (meta
// pages, page headers, branch and leaf elements, the freelist) from constants
// copied out of bbolt, which keeps them private.
//
// The bbolt engine uses it to check a file before opening it ([CheckFile],
// [QuickCheckLocked]), to look for damage along one key's path
// ([LookupDamage], [TreeDamage]), to turn a fault on bbolt's map into an error
// ([GuardFaults]), and, through [Walker], to verify and salvage a file.
// docs/engines.md describes the checks and what each finds.
package boltpage
