// SigV4Tests.swift: the S3 backend's signer against AWS's published Signature Version 4 test suite
// (aws-sig-v4-test-suite: the credentials AKIDEXAMPLE / wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY,
// us-east-1, service "service", 20150830T123600Z): for each case its canonical request, string to sign
// and Authorization header, as the suite publishes them (fixtures, not derived from this code).

import Testing

@testable import YashimaShared

@Suite("SigV4: AWS's signature test suite")
struct SigV4Tests {
    private let signer = SigV4Signer(
        credentials: SigV4Credentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: Array("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".utf8),
            sessionToken: nil),
        region: "us-east-1", service: "service")
    private let time = SigV4Time(stamp: "20150830T123600Z")
    private let base: [(name: String, value: String)] = [
        ("Host", "example.amazonaws.com"), ("X-Amz-Date", "20150830T123600Z"),
    ]

    /// One case of the suite: the request, and what it publishes.
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let method: String
        let path: String
        var query: [(name: String, value: String)] = []
        var headers: [(name: String, value: String)] = []
        var body = ""
        let canonicalRequest: String
        let stringToSignHash: String
        let signedHeaders: String
        let signature: String

        var testDescription: String { name }
    }

    static let emptyHash = SigV4Signer.emptyPayloadHash
    static let vectors: [Vector] = [
        Vector(
            name: "get-vanilla", method: "GET", path: "/",
            canonicalRequest:
                "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
            signedHeaders: "host;x-amz-date",
            signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        Vector(
            name: "get-vanilla-empty-query-key", method: "GET", path: "/", query: [("Param1", "value1")],
            canonicalRequest:
                "GET\n/\nParam1=value1\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "1e24db194ed7d0eec2de28d7369675a243488e08526e8c1c73571282f7c517ab",
            signedHeaders: "host;x-amz-date",
            signature: "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"),
        Vector(
            name: "get-vanilla-query-order-key", method: "GET", path: "/",
            query: [("Param1", "value2"), ("Param1", "Value1")],
            canonicalRequest:
                "GET\n/\nParam1=Value1&Param1=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                + "host;x-amz-date\n\(emptyHash)",
            stringToSignHash: "704b4cef673542d84cdff252633f065e8daeba5f168b77116f8b1bcaf3d38f89",
            signedHeaders: "host;x-amz-date",
            signature: "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1"),
        Vector(
            name: "get-vanilla-query-order-key-case", method: "GET", path: "/",
            query: [("Param2", "value2"), ("Param1", "value1")],
            canonicalRequest:
                "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                + "host;x-amz-date\n\(emptyHash)",
            stringToSignHash: "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
            signedHeaders: "host;x-amz-date",
            signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
        Vector(
            name: "get-vanilla-query-order-value", method: "GET", path: "/",
            query: [("Param1", "value2"), ("Param1", "value1")],
            canonicalRequest:
                "GET\n/\nParam1=value1&Param1=value2\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
                + "host;x-amz-date\n\(emptyHash)",
            stringToSignHash: "c968629d70850097a2d8781c9bf7edcb988b04cac14cca9be4acc3595f884606",
            signedHeaders: "host;x-amz-date",
            signature: "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"),
        Vector(
            name: "get-unreserved", method: "GET",
            path: "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            canonicalRequest:
                "GET\n/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n\n"
                + "host:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "6a968768eefaa713e2a6b16b589a8ea192661f098f37349f4e2c0082757446f9",
            signedHeaders: "host;x-amz-date",
            signature: "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"),
        Vector(
            name: "get-utf8", method: "GET", path: "/\u{1234}",
            canonicalRequest:
                "GET\n/%E1%88%B4\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\(emptyHash)",
            stringToSignHash: "2a0a97d02205e45ce2e994789806b19270cfbbb0921b278ccf58f5249ac42102",
            signedHeaders: "host;x-amz-date",
            signature: "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"),
        Vector(
            name: "get-space", method: "GET", path: "/example space/",
            canonicalRequest:
                "GET\n/example%20space/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
                + emptyHash,
            stringToSignHash: "63ee75631ed7234ae61b5f736dfc7754cdccfedbff4b5128a915706ee9390d86",
            signedHeaders: "host;x-amz-date",
            signature: "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"),
        Vector(
            name: "get-header-value-trim", method: "GET", path: "/",
            headers: [("My-Header1", " value1"), ("My-Header2", " \"a   b   c\"")],
            canonicalRequest:
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\n"
                + "x-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n\(emptyHash)",
            stringToSignHash: "a726db9b0df21c14f559d0a978e563112acb1b9e05476f0a6a1c7d68f28605c7",
            signedHeaders: "host;my-header1;my-header2;x-amz-date",
            signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"),
        Vector(
            name: "get-header-value-order", method: "GET", path: "/",
            headers: [
                ("My-Header1", "value4"), ("My-Header1", "value1"), ("My-Header1", "value3"), ("My-Header1", "value2"),
            ],
            canonicalRequest:
                "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value4,value1,value3,value2\n"
                + "x-amz-date:20150830T123600Z\n\nhost;my-header1;x-amz-date\n\(emptyHash)",
            stringToSignHash: "31ce73cd3f3d9f66977ad3dd957dc47af14df92fcd8509f59b349e9137c58b86",
            signedHeaders: "host;my-header1;x-amz-date",
            signature: "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"),
        // As AWS publishes it (a copy of the suite that adds Content-Length to the canonical request keeps the
        // original's string to sign and signature, which then do not match it: the original is used).
        Vector(
            name: "post-x-www-form-urlencoded", method: "POST", path: "/",
            headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: "Param1=value1",
            canonicalRequest:
                "POST\n/\n\ncontent-type:application/x-www-form-urlencoded\nhost:example.amazonaws.com\n"
                + "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
                + "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
            stringToSignHash: "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
            signedHeaders: "content-type;host;x-amz-date",
            signature: "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
        Vector(
            name: "post-sts-header-before", method: "POST", path: "/",
            headers: [("X-Amz-Security-Token", Self.sessionToken)],
            canonicalRequest:
                "POST\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n"
                + "x-amz-security-token:\(Self.sessionToken)\n\nhost;x-amz-date;x-amz-security-token\n\(emptyHash)",
            stringToSignHash: "c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6",
            signedHeaders: "host;x-amz-date;x-amz-security-token",
            signature: "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"),
    ]

    static let sessionToken =
        "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8"
        + "YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6"
        + "fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQ"
        + "wj2ICCR/oLxBA=="

    @Test("canonical request, string to sign and signature of each vector", arguments: vectors)
    func vector(_ vector: Vector) {
        let hash = SHA256.hash(Array(vector.body.utf8)).hex
        let signed = signer.sign(
            method: vector.method, path: vector.path, query: vector.query, headers: base + vector.headers,
            payloadHash: hash, time: time)
        #expect(signed.canonicalRequest == vector.canonicalRequest)
        #expect(SHA256.hash(Array(signed.canonicalRequest.utf8)).hex == vector.stringToSignHash)
        #expect(
            signed.stringToSign
                == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n\(vector.stringToSignHash)"
        )
        #expect(
            signed.authorization
                == "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=\(vector.signedHeaders), Signature=\(vector.signature)")
    }

    @Test("the time stamp from the clock, and credentials never printed")
    func timeAndRedaction() {
        // 2015-08-30 12:36:00 UTC.
        #expect(SigV4Time(realtimeNanoseconds: 1_440_938_160 * 1_000_000_000).stamp == "20150830T123600Z")
        #expect(SigV4Time(realtimeNanoseconds: 0).stamp == "19700101T000000Z")
        let credentials = signer.credentials
        for text in [
            "\(credentials)", String(reflecting: credentials),
            "\(Mirror(reflecting: credentials).children.map(\.value))",
        ] {
            #expect(!text.contains("EXAMPLEKEY") && text.contains("AKIDEXAMPLE"))
        }
    }
}
