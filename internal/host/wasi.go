package host

import (
	"crypto/rand"
	"encoding/binary"
	"io"
)

// WASI errno values (wasi_snapshot_preview1).
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNotdir  = 20
	errnoNoent   = 44
	errnoNosys   = 52
	errnoNotsup  = 58
)

// wasiFuncs are the WASI functions with cpp-host's behaviour (src/exports.cc). Functions that are
// stubs there are stubs here too, returning what cpp-host returns.
func wasiFuncs() []hostFunc {
	nosys := errnoOf(errnoNosys)
	notsup := errnoOf(errnoNotsup)
	return []hostFunc{
		// Envoy 1.33 (cpp-host c4d7bb0): 18 functions.
		{name: "fd_write", params: sig(i32, i32, i32, i32), results: errno, fn: wasiFdWrite},
		{name: "fd_read", params: sig(i32, i32, i32, i32), results: errno, fn: nosys},
		// fd_seek and fd_close succeed without doing anything (they only log at trace level).
		{name: "fd_seek", params: sig(i32, i64, i32, i32), results: errno, fn: errnoOf(errnoSuccess)},
		{name: "fd_close", params: sig(i32), results: errno, fn: errnoOf(errnoSuccess)},
		{name: "fd_fdstat_get", params: sig(i32, i32), results: errno, fn: wasiFdFdstatGet},
		{name: "fd_fdstat_set_flags", params: sig(i32, i32), results: errno, fn: nosys},
		{name: "environ_get", params: sig(i32, i32), results: errno, fn: wasiEnvironGet},
		{name: "environ_sizes_get", params: sig(i32, i32), results: errno, fn: wasiEnvironSizesGet},
		{name: "args_get", params: sig(i32, i32), results: errno, fn: errnoOf(errnoSuccess)},
		{name: "args_sizes_get", params: sig(i32, i32), results: errno, fn: wasiArgsSizesGet},
		{name: "clock_time_get", params: sig(i32, i64, i32), results: errno, fn: wasiClockTimeGet},
		{name: "random_get", params: sig(i32, i32), results: errno, fn: wasiRandomGet},
		{name: "sched_yield", results: errno, fn: errnoOf(errnoSuccess)},
		{name: "poll_oneoff", params: sig(i32, i32, i32, i32), results: errno, fn: wasiPollOneoff},
		// proc_exit returns to the module (cpp-host only logs it); Go's runtime then traps.
		{name: "proc_exit", params: sig(i32), fn: func(vm *VM, stack []uint64) {}},
		{name: "path_open", params: sig(i32, i32, i32, i32, i32, i64, i64, i32, i32), results: errno, fn: errnoOf(errnoNoent)},
		{name: "fd_prestat_get", params: sig(i32, i32), results: errno, fn: errnoOf(errnoBadf)},
		{name: "fd_prestat_dir_name", params: sig(i32, i32, i32), results: errno, fn: nosys},

		// Envoy 1.39 (cpp-host 94091cd) adds the rest of WASI preview1 that Go's runtime and os
		// package import: 27 functions, with cpp-host's stub results (src/exports.cc; the list is
		// FOR_ALL_WASI_FUNCTIONS in include/proxy-wasm/exports.h, 45 in all, with no proc_raise).
		{name: "fd_fdstat_set_rights", params: sig(i32, i64, i64), results: errno, since: Envoy139, fn: stdioOnly(errnoSuccess)},
		{name: "clock_res_get", params: sig(i32, i32), results: errno, since: Envoy139, fn: wasiClockResGet},
		{name: "fd_advise", params: sig(i32, i64, i64, i32), results: errno, since: Envoy139, fn: errnoOf(errnoSuccess)},
		{name: "fd_allocate", params: sig(i32, i64, i64), results: errno, since: Envoy139, fn: stdioOnly(errnoSuccess)},
		{name: "fd_datasync", params: sig(i32), results: errno, since: Envoy139, fn: stdioOnly(errnoSuccess)},
		{name: "fd_filestat_set_size", params: sig(i32, i64), results: errno, since: Envoy139, fn: stdioOnly(errnoSuccess)},
		{name: "fd_filestat_set_times", params: sig(i32, i64, i64, i32), results: errno, since: Envoy139, fn: stdioOnly(errnoSuccess)},
		{name: "fd_pread", params: sig(i32, i32, i32, i64, i32), results: errno, since: Envoy139, fn: nosys},
		{name: "fd_pwrite", params: sig(i32, i32, i32, i64, i32), results: errno, since: Envoy139, fn: wasiFdPwrite},
		{name: "fd_readdir", params: sig(i32, i32, i32, i64, i32), results: errno, since: Envoy139, fn: wasiFdReaddir},
		{name: "fd_renumber", params: sig(i32, i32), results: errno, since: Envoy139, fn: wasiFdRenumber},
		{name: "fd_sync", params: sig(i32), results: errno, since: Envoy139, fn: stdioOnly(errnoSuccess)},
		{name: "fd_tell", params: sig(i32, i32), results: errno, since: Envoy139, fn: wasiFdTell},
		{name: "path_create_directory", params: sig(i32, i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "path_filestat_set_times", params: sig(i32, i32, i32, i32, i64, i64, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "path_link", params: sig(i32, i32, i32, i32, i32, i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "path_readlink", params: sig(i32, i32, i32, i32, i32, i32), results: errno, since: Envoy139, fn: zeroThenNotsup(5, 4)},
		{name: "path_remove_directory", params: sig(i32, i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "path_rename", params: sig(i32, i32, i32, i32, i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "path_symlink", params: sig(i32, i32, i32, i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "path_unlink_file", params: sig(i32, i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "sock_accept", params: sig(i32, i32, i32), results: errno, since: Envoy139, fn: zeroThenNotsup(2, 8)},
		{name: "sock_recv", params: sig(i32, i32, i32, i32, i32, i32), results: errno, since: Envoy139, fn: wasiSockRecv},
		{name: "sock_send", params: sig(i32, i32, i32, i32, i32), results: errno, since: Envoy139, fn: zeroThenNotsup(4, 4)},
		{name: "sock_shutdown", params: sig(i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "path_filestat_get", params: sig(i32, i32, i32, i32, i32), results: errno, since: Envoy139, fn: notsup},
		{name: "fd_filestat_get", params: sig(i32, i32), results: errno, since: Envoy139, fn: errnoOf(errnoBadf)},
	}
}

// fd_write: fd 1 logs at info, fd 2 at error, one line per call with one trailing newline
// stripped (nothing for an empty write); other descriptors are EBADF.
func wasiFdWrite(vm *VM, stack []uint64) {
	fd, iovs, iovsLen, nwrittenPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	stack[0] = uint64(vm.writev(fd, iovs, iovsLen, nwrittenPtr))
}

// fd_pwrite writes like fd_write, ignoring the offset (cpp-host: only stdout and stderr).
func wasiFdPwrite(vm *VM, stack []uint64) {
	fd, iovs, iovsLen, nwrittenPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[4])
	stack[0] = uint64(vm.writev(fd, iovs, iovsLen, nwrittenPtr))
}

func (vm *VM) writev(fd, iovs, iovsLen, nwrittenPtr uint32) uint32 {
	if fd != 1 && fd != 2 {
		return errnoBadf
	}
	var msg []byte
	for i := uint32(0); i < iovsLen; i++ {
		ptr, ok1 := vm.readU32(iovs + 8*i)
		size, ok2 := vm.readU32(iovs + 8*i + 4)
		data, ok3 := vm.read(ptr, size)
		if !ok1 || !ok2 || !ok3 {
			return errnoFault
		}
		msg = append(msg, data...)
	}
	written := uint32(len(msg))
	if n := len(msg); n > 0 {
		if msg[n-1] == '\n' {
			msg = msg[:n-1]
		}
		level := uint32(2)
		if fd == 2 {
			level = 4
		}
		vm.host.log(vm.id, level, string(msg))
	}
	if !vm.writeU32(nwrittenPtr, written) {
		return errnoFault
	}
	return errnoSuccess
}

// fd_fdstat_get: stdout and stderr report the right to write and file type 0 (unknown), as
// cpp-host zeroes everything but fs_rights_base; nothing else exists.
func wasiFdFdstatGet(vm *VM, stack []uint64) {
	fd, buf := uint32(stack[0]), uint32(stack[1])
	if fd != 1 && fd != 2 {
		stack[0] = errnoBadf
		return
	}
	var stat [24]byte
	binary.LittleEndian.PutUint64(stat[8:], 64) // rights_base: FD_WRITE
	binary.LittleEndian.PutUint64(stat[16:], 0) // rights_inheriting
	answerAfterWrite(stack, vm.write(buf, stat[:]), errnoSuccess)
}

func wasiEnvironSizesGet(vm *VM, stack []uint64) {
	countPtr, sizePtr := uint32(stack[0]), uint32(stack[1])
	size := 0
	for _, kv := range vm.host.opts.Env {
		size += len(kv) + 1
	}
	answerAfterWrite(stack, vm.writeU32(countPtr, uint32(len(vm.host.opts.Env))) && vm.writeU32(sizePtr, uint32(size)), errnoSuccess)
}

func wasiEnvironGet(vm *VM, stack []uint64) {
	environ, buf := uint32(stack[0]), uint32(stack[1])
	for i, kv := range vm.host.opts.Env {
		if !vm.writeU32(environ+4*uint32(i), buf) || !vm.write(buf, append([]byte(kv), 0)) {
			stack[0] = errnoFault
			return
		}
		buf += uint32(len(kv) + 1)
	}
	stack[0] = errnoSuccess
}

func wasiArgsSizesGet(vm *VM, stack []uint64) {
	answerAfterWrite(stack, vm.writeU32(uint32(stack[0]), 0) && vm.writeU32(uint32(stack[1]), 0), errnoSuccess)
}

// clock_time_get: clock 0 is the wall clock, 1 the monotonic clock; precision is ignored.
func wasiClockTimeGet(vm *VM, stack []uint64) {
	id, out := uint32(stack[0]), uint32(stack[2])
	var now int64
	switch id {
	case 0:
		now = vm.host.opts.Clock.Wall()
	case 1:
		now = vm.host.opts.Clock.Monotonic()
	default:
		stack[0] = errnoNotsup
		return
	}
	answerAfterWrite(stack, vm.writeU64(out, uint64(now)), errnoSuccess)
}

func wasiClockResGet(vm *VM, stack []uint64) {
	id, out := uint32(stack[0]), uint32(stack[1])
	if id > 1 {
		stack[0] = errnoNotsup
		return
	}
	answerAfterWrite(stack, vm.writeU64(out, 1), errnoSuccess)
}

// random_get: at most 64 KiB per call, as BoringSSL's RAND_bytes is called in Envoy; from
// Options.Random when set.
func wasiRandomGet(vm *VM, stack []uint64) {
	buf, size := uint32(stack[0]), uint32(stack[1])
	if size > 64<<10 {
		stack[0] = errnoInval
		return
	}
	data := make([]byte, size)
	if r := vm.host.opts.Random; r != nil {
		vm.host.randomMu.Lock()
		_, err := io.ReadFull(r, data)
		vm.host.randomMu.Unlock()
		if err != nil {
			stack[0] = errnoFault
			return
		}
	} else {
		_, _ = rand.Read(data)
	}
	answerAfterWrite(stack, vm.write(buf, data), errnoSuccess)
}

// poll_oneoff: Envoy up to 1.38 does not implement it (ENOSYS, and Go's runtime throws on that);
// from 1.39 it reports success with no events and never sleeps.
func wasiPollOneoff(vm *VM, stack []uint64) {
	vm.counters.pollOneoff++
	if vm.host.opts.Profile < Envoy139 {
		stack[0] = errnoNosys
		return
	}
	answerAfterWrite(stack, vm.writeU32(uint32(stack[3]), 0), errnoSuccess)
}

// answerAfterWrite answers errno when the call's writes to memory succeeded, else EFAULT.
func answerAfterWrite(stack []uint64, written bool, errno uint32) {
	if !written {
		stack[0] = errnoFault
		return
	}
	stack[0] = uint64(errno)
}

func errnoOf(errno uint32) func(*VM, []uint64) {
	return func(vm *VM, stack []uint64) { stack[0] = uint64(errno) }
}

// stdioOnly answers errno for stdout and stderr (the first argument) and EBADF otherwise, as
// cpp-host's no-op file functions do.
func stdioOnly(errno uint32) func(*VM, []uint64) {
	return func(vm *VM, stack []uint64) {
		if fd := uint32(stack[0]); fd != 1 && fd != 2 {
			stack[0] = errnoBadf
			return
		}
		stack[0] = uint64(errno)
	}
}

// zeroThenNotsup writes a zero of size bytes to the pointer argument arg (cpp-host writes a
// 32-bit word, or 8 bytes for sock_accept), then answers ENOTSUP,
// as cpp-host's path_readlink and socket stubs do.
func zeroThenNotsup(arg int, size int) func(*VM, []uint64) {
	return func(vm *VM, stack []uint64) {
		answerAfterWrite(stack, vm.write(uint32(stack[arg]), make([]byte, size)), errnoNotsup)
	}
}

// fd_readdir: nothing read (0 written), ENOTDIR.
func wasiFdReaddir(vm *VM, stack []uint64) {
	answerAfterWrite(stack, vm.writeU32(uint32(stack[4]), 0), errnoNotdir)
}

// fd_renumber: EBADF unless both are stdout or stderr, then ENOTSUP.
func wasiFdRenumber(vm *VM, stack []uint64) {
	fd, to := uint32(stack[0]), uint32(stack[1])
	if (fd != 1 && fd != 2) || (to != 1 && to != 2) {
		stack[0] = errnoBadf
		return
	}
	stack[0] = errnoNotsup
}

// fd_tell: offset 0 for stdout and stderr, EBADF otherwise.
func wasiFdTell(vm *VM, stack []uint64) {
	if fd := uint32(stack[0]); fd != 1 && fd != 2 {
		stack[0] = errnoBadf
		return
	}
	answerAfterWrite(stack, vm.writeU64(uint32(stack[1]), 0), errnoSuccess)
}

// sock_recv: zero bytes received (u32) and zero flags (u16), then ENOTSUP.
func wasiSockRecv(vm *VM, stack []uint64) {
	answerAfterWrite(stack, vm.writeU32(uint32(stack[4]), 0) && vm.write(uint32(stack[5]), make([]byte, 2)), errnoNotsup)
}
