// swift-tools-version:6.0
import PackageDescription

// Tern's benchmark drivers for the Swift clients, kept out of the root package so that Tern
// itself never depends on async-http-client. The C drivers (tern-c, curl-multi) and the parser
// micro-benchmarks build with CMake (bench/CMakeLists.txt); bench/run builds and runs both.
//
// Every executable here follows the driver contract in bench/README.md:
//   DRIVER get URL N C | DRIVER download URL PATH; exit 0/1/2/3; $BENCH_CAFILE; one result line.

// tern-swift is linked as the root package links the `tern` CLI (executableLinkerSettings in
// ../Package.swift, measured in ../linker/README.md): lld with packed relative relocations, the C
// libraries and libstdc++ from their static archives, no -export-dynamic, the functions of
// ../linker/order.txt first. The other drivers keep the defaults their users get.
let ternLinkerSettings: [LinkerSetting] = [
    .unsafeFlags(
        [
            "-use-ld=lld",
            "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
            "-L", Context.packageDirectory + "/../linker/static",
            "-Xlinker", "--no-export-dynamic",
            "-Xlinker", "--symbol-ordering-file=" + Context.packageDirectory + "/../linker/order.txt",
            "-Xlinker", "--no-warn-symbol-ordering",
        ],
        .when(platforms: [.linux], configuration: .release)
    ),
]

let package = Package(
    name: "TernBench",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "ahc", targets: ["ahc"]),
        .executable(name: "urlsession", targets: ["urlsession"]),
        .executable(name: "tern-swift", targets: ["tern-swift"]),
    ],
    dependencies: [
        .package(name: "Tern", path: ".."),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.0"),
    ],
    targets: [
        // Argument parsing, clock and result line shared by the Swift drivers.
        .target(name: "BenchSupport"),
        .executableTarget(
            name: "ahc",
            dependencies: [
                "BenchSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
        .executableTarget(name: "urlsession", dependencies: ["BenchSupport"]),
        .executableTarget(
            name: "tern-swift",
            dependencies: [
                "BenchSupport",
                .product(name: "Tern", package: "Tern"),
            ],
            linkerSettings: ternLinkerSettings
        ),
        .executableTarget(
            name: "tern-swift-floor",
            dependencies: [
                "BenchSupport",
                .product(name: "CTern", package: "Tern"),
            ],
            linkerSettings: ternLinkerSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
