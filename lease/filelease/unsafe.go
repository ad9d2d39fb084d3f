package filelease

import "unsafe"

// unsafePointer views the start of b as a pointer, to decode inotify events.
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
