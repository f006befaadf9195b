import CCurl
public enum CurlProbe { public static func version() -> String { String(cString: curl_version()) } }
