// Symbolic errno names for `data.errnoName`: programs branch on "ENOSPC", not on 28,
// whose value differs between systems.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension RPCError {
    /// The symbolic name of `code` ("ENOSPC"), or "E<number>" for one not listed.
    public static func errnoName(_ code: Int32) -> String {
        switch code {
        case EPERM: return "EPERM"
        case ENOENT: return "ENOENT"
        case EINTR: return "EINTR"
        case EIO: return "EIO"
        case EBADF: return "EBADF"
        case EAGAIN: return "EAGAIN"
        case ENOMEM: return "ENOMEM"
        case EACCES: return "EACCES"
        case EBUSY: return "EBUSY"
        case EEXIST: return "EEXIST"
        case EXDEV: return "EXDEV"
        case ENOTDIR: return "ENOTDIR"
        case EISDIR: return "EISDIR"
        case EINVAL: return "EINVAL"
        case ENFILE: return "ENFILE"
        case EMFILE: return "EMFILE"
        case EFBIG: return "EFBIG"
        case ENOSPC: return "ENOSPC"
        case EROFS: return "EROFS"
        case EMLINK: return "EMLINK"
        case ENAMETOOLONG: return "ENAMETOOLONG"
        case ENOTEMPTY: return "ENOTEMPTY"
        case ELOOP: return "ELOOP"
        case EDQUOT: return "EDQUOT"
        case ENOTSUP: return "ENOTSUP"
        case ENODATA: return "ENODATA"
        case ESTALE: return "ESTALE"
        default: return "E\(code)"
        }
    }
}
