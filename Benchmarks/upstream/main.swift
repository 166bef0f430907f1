// Pipelined GETs through HalcyonUpstream's RESP3 client against one Redis server, for
// Benchmarks/upstream.sh, which runs redis-py's pipelined GETs against the same server
// beside it. Prints one line of JSON: requests/s and the client's CPU per request.
//
//   upstream-bench --port 6379 [--requests 200000] [--pipeline 32] [--value-size 100] [--via client|connection]

import Foundation
import HalcyonUpstream
import NIOCore
import NIOPosix

struct Options {
    var port = 6379
    var requests = 200_000
    var pipeline = 32
    var valueSize = 100
    var via = "client"

    init(_ arguments: [String]) {
        var index = 0
        while index + 1 < arguments.count {
            let value = arguments[index + 1]
            switch arguments[index] {
            case "--port": port = Int(value)!
            case "--requests": requests = Int(value)!
            case "--pipeline": pipeline = Int(value)!
            case "--value-size": valueSize = Int(value)!
            case "--via": via = value
            default: fatalError("unknown option \(arguments[index])")
            }
            index += 2
        }
    }
}

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
let address = NodeAddress.tcp(host: "127.0.0.1", port: options.port)
let key = ByteBuffer(string: "bench:key")
let get = [ByteBuffer(string: "GET"), key]

let send: ([[ByteBuffer]]) -> [EventLoopFuture<RESP3Value>]
var teardown: () -> Void
if options.via == "connection" {
    let connection = try RedisConnection.connect(to: address, on: group.next(), options: .init()).wait()
    send = { connection.pipeline($0) }
    teardown = { connection.close() }
} else {
    var configuration = RedisClient.Configuration(seeds: [address])
    configuration.tracking = false
    let client = RedisClient(configuration: configuration, eventLoop: group.next())
    try client.start().wait()
    send = { commands in commands.map { client.send($0, route: .key(key)) } }
    teardown = { _ = client.shutdown() }
}
_ = try send([[ByteBuffer(string: "SET"), key, ByteBuffer(repeating: UInt8(ascii: "v"), count: options.valueSize)]])[0].wait()

let batch = Array(repeating: get, count: options.pipeline)
// Warm up, then measure.
for _ in 0..<200 { _ = try EventLoopFuture.whenAllSucceed(send(batch), on: group.next()).wait() }
let rounds = max(1, options.requests / options.pipeline)
let cpuBefore = cpuSeconds()
let start = DispatchTime.now()
for _ in 0..<rounds {
    let replies = try EventLoopFuture.whenAllSucceed(send(batch), on: group.next()).wait()
    precondition(replies.count == options.pipeline && replies[0].bytes?.readableBytes == options.valueSize)
}
let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
let cpu = cpuSeconds() - cpuBefore
let total = rounds * options.pipeline
print(#"{"client": "halcyon-\#(options.via)", "requests": \#(total), "seconds": \#(seconds), "rps": \#(Double(total) / seconds), "client_cpu_us": \#(cpu / Double(total) * 1e6)}"#)
teardown()
try group.syncShutdownGracefully()
