// This file is dirsync_unix.go's counterpart where a directory is
// not a file to fsync: on Windows the file system's own log makes a new
// file's name durable with it, and Go cannot open a directory for Sync.

//go:build !unix

package boltjournal

const dirSyncable = false
