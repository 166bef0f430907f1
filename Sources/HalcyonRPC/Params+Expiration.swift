// Expirations and extending policies in their wire forms (Docs/PROTOCOL.md §5).

import Foundation
import HalcyonCache
import HalcyonJSON

extension Params {
    /// An optional expiration: `"never"`, `"expired"`, `{"seconds": N}` (N > 0,
    /// fractional allowed), `{"days": N}` (integer N > 0) or `{"date": T}` (Unix
    /// seconds). Anything else is `invalidExpiration`.
    public func expiration(_ name: String) throws(RPCError) -> StorageExpiration? {
        guard let member = value(name) else { return nil }
        return try Params.parseExpiration(member, param: name, reason: .invalidExpiration)
    }

    /// An optional extending policy: `"none"`, `"cacheTime"` or
    /// `{"expirationTime": <expiration>}`. Anything else is `invalidExtending`.
    public func extending(_ name: String = "extendingExpiration") throws(RPCError) -> ExpirationExtending? {
        guard let member = value(name) else { return nil }
        func invalid(_ why: String) -> RPCError {
            .invalidParams(reason: .invalidExtending, param: name, message: "'\(name)' \(why)")
        }
        if let text = member.string {
            switch text {
            case "none": return ExpirationExtending.none
            case "cacheTime": return .cacheTime
            default: throw invalid("must be \"none\", \"cacheTime\" or {\"expirationTime\": <expiration>}")
            }
        }
        guard member.kind == .object, member.count == 1, let inner = member["expirationTime"] else {
            throw invalid("must be \"none\", \"cacheTime\" or {\"expirationTime\": <expiration>}")
        }
        return .expirationTime(try Params.parseExpiration(inner, param: "\(name).expirationTime", reason: .invalidExtending))
    }

    /// The latest `{"date": T}` accepted: the end of year 9999, Unix seconds. Later or
    /// earlier instants are mistakes (or probes), not cache lifetimes, and far beyond what
    /// `Date` arithmetic keeps exact.
    static let latestDate: Double = 253_402_300_799
    /// The longest `{"seconds": N}` accepted: the same 1,000,000 days `{"days": N}` allows.
    static let longestSeconds: Double = 86_400 * 1_000_000

    static func parseExpiration(_ member: JSONView, param: String,
                                reason: RPCError.InvalidParamsReason) throws(RPCError) -> StorageExpiration {
        func invalid(_ why: String) -> RPCError {
            .invalidParams(reason: reason, param: param, message: "'\(param)' \(why)")
        }
        let forms = "must be \"never\", \"expired\", {\"seconds\": N}, {\"days\": N} or {\"date\": T}"
        if let text = member.string {
            switch text {
            case "never": return .never
            case "expired": return .expired
            default: throw invalid(forms)
            }
        }
        guard member.kind == .object, member.count == 1, let (kind, amount) = member.firstMember else {
            throw invalid(forms)
        }
        switch kind {
        case "seconds":
            guard let seconds = amount.double, seconds > 0, seconds <= longestSeconds else {
                throw invalid("seconds must be a number > 0 (at most 86400000000)")
            }
            return .seconds(seconds)
        case "days":
            guard let days = amount.int64, days > 0, days <= 1_000_000 else {
                throw invalid("days must be an integer > 0 (at most 1000000)")
            }
            return .days(Int(days))
        case "date":
            guard let seconds = amount.double, seconds >= 0, seconds <= latestDate else {
                throw invalid("date must be Unix seconds within 0...253402300799 (years 1970 to 9999)")
            }
            return .date(Date(timeIntervalSince1970: seconds))
        default:
            throw invalid(forms)
        }
    }
}
