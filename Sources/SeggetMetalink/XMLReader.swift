import CLibXML2
import SeggetSystem

/// libxml2's reader API, loaded from libxml2.so.2 when the first Metalink is parsed, once for the
/// process: segget does not link libxml2 (see CLibXML2's shim.h). Each function has libxml2's C
/// prototype (xmlreader.h); a reader is an opaque pointer.
struct XMLLibrary: Sendable {
    typealias Reader = OpaquePointer
    let readerForMemory: @convention(c) (UnsafePointer<CChar>?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int32) -> Reader?
    let read: @convention(c) (Reader) -> Int32
    let nodeType: @convention(c) (Reader) -> Int32
    let depth: @convention(c) (Reader) -> Int32
    let isEmptyElement: @convention(c) (Reader) -> Int32
    let localName: @convention(c) (Reader) -> UnsafePointer<UInt8>?
    let namespaceURI: @convention(c) (Reader) -> UnsafePointer<UInt8>?
    let value: @convention(c) (Reader) -> UnsafePointer<UInt8>?
    let moveToNextAttribute: @convention(c) (Reader) -> Int32
    let moveToElement: @convention(c) (Reader) -> Int32
    let lineNumber: @convention(c) (Reader) -> Int32
    let setErrorHandler: @convention(c) (Reader, segget_xml_reader_error_func?, UnsafeMutableRawPointer?) -> Void
    let free: @convention(c) (Reader) -> Void

    static let shared: Result<XMLLibrary, MetalinkError> = {
        do throws(SharedLibraryError) {
            return .success(try load())
        } catch {
            return .failure(MetalinkError(
                "reading a Metalink needs libxml2 (libxml2.so.2), which could not be loaded (\(error.message)); install it (on Debian and Ubuntu: apt-get install libxml2)."))
        }
    }()

    private static func load() throws(SharedLibraryError) -> XMLLibrary {
        let library = try SharedLibrary(name: "libxml2.so.2")
        func f<F>(_ name: String) throws(SharedLibraryError) -> F { unsafeBitCast(try library.symbol(name), to: F.self) }
        return XMLLibrary(
            readerForMemory: try f("xmlReaderForMemory"), read: try f("xmlTextReaderRead"),
            nodeType: try f("xmlTextReaderNodeType"), depth: try f("xmlTextReaderDepth"),
            isEmptyElement: try f("xmlTextReaderIsEmptyElement"), localName: try f("xmlTextReaderConstLocalName"),
            namespaceURI: try f("xmlTextReaderConstNamespaceUri"), value: try f("xmlTextReaderConstValue"),
            moveToNextAttribute: try f("xmlTextReaderMoveToNextAttribute"), moveToElement: try f("xmlTextReaderMoveToElement"),
            lineNumber: try f("xmlTextReaderGetParserLineNumber"), setErrorHandler: try f("xmlTextReaderSetErrorHandler"),
            free: try f("xmlFreeTextReader"))
    }
}

/// What the reader met next in the document.
enum XMLNode: Equatable {
    /// An element's start: its local name, namespace URI (empty when none), attributes (local name →
    /// value, without namespace declarations), and whether it is empty (`<a/>`: no end follows).
    case start(name: String, namespace: String, attributes: [String: String], empty: Bool)
    /// Character data (text or CDATA) inside the current element.
    case text(String)
    case end(name: String, namespace: String)
}

/// A pull reader over one XML document in memory, with libxml2's network access, entity
/// substitution, DTD loading and error printing off, and bounds of its own: the document's nesting
/// depth, attributes per element and each text's length. A document with a document type
/// declaration or an entity reference is refused: a Metalink has neither, and they are how XML
/// expands (billion laughs) or reaches outside itself (external entities). Not thread-safe.
final class XMLReader {
    private let api: XMLLibrary
    private let reader: XMLLibrary.Reader
    private let limits: MetalinkLimits
    /// The document's bytes, alive as long as the reader reads them (libxml2 may keep a pointer to
    /// them rather than a copy).
    private let bytes: UnsafeMutableBufferPointer<CChar>

    init(_ document: [UInt8], limits: MetalinkLimits) throws(MetalinkError) {
        let api = try XMLLibrary.shared.get()
        self.api = api
        self.limits = limits
        let copy = UnsafeMutableBufferPointer<CChar>.allocate(capacity: max(1, document.count))
        for (i, b) in document.enumerated() { copy[i] = CChar(bitPattern: b) }
        // Never NOENT (entities substituted), DTDLOAD or DTDATTR; NONET in case anything reaches out.
        let options = Int32(SEGGET_XML_PARSE_NONET | SEGGET_XML_PARSE_NOERROR | SEGGET_XML_PARSE_NOWARNING | SEGGET_XML_PARSE_NOCDATA)
        guard let made = api.readerForMemory(copy.baseAddress, Int32(document.count), "metalink.meta4", "UTF-8", options) else {
            copy.deallocate()
            throw MetalinkError("the Metalink could not be read (libxml2 could not start a reader).")
        }
        bytes = copy
        reader = made
        // The reader's errors are turned into one sentence here, never printed by libxml2.
        api.setErrorHandler(reader, { _, _, _, _ in }, nil)
    }

    deinit {
        api.free(reader)
        bytes.deallocate()
    }

    private var raw: XMLLibrary.Reader { reader }

    /// The line the parser has reached, for messages.
    var line: Int { Int(api.lineNumber(raw)) }

    /// The next node that matters (elements, their ends, character data); nil at the document's end.
    /// Comments, processing instructions and white space between elements are skipped.
    func next() throws(MetalinkError) -> XMLNode? {
        while true {
            let rc = api.read(raw)
            if rc == 0 { return nil }
            guard rc == 1 else { throw MetalinkError("the Metalink is not well-formed XML (near line \(line)).") }
            let depth = Int(api.depth(raw))
            if depth >= limits.depth {
                throw MetalinkError("the Metalink nests elements more than \(limits.depth) deep; a Metalink needs 4.")
            }
            switch Int(api.nodeType(raw)) {
            case Int(SEGGET_XML_NODE_ELEMENT):
                let name = string(api.localName(raw))
                let namespace = string(api.namespaceURI(raw))
                let empty = api.isEmptyElement(raw) == 1
                var attributes: [String: String] = [:]
                var count = 0
                while api.moveToNextAttribute(raw) == 1 {
                    count += 1
                    if count > limits.attributes {
                        throw MetalinkError("an element of the Metalink has more than \(limits.attributes) attributes (line \(line)).")
                    }
                    // Namespace declarations are attributes to the reader; they are not the element's.
                    if string(api.namespaceURI(raw)) == "http://www.w3.org/2000/xmlns/" { continue }
                    let value = string(api.value(raw))
                    if value.utf8.count > limits.textBytes {
                        throw MetalinkError("an attribute of the Metalink is longer than \(limits.textBytes) bytes (line \(line)).")
                    }
                    attributes[string(api.localName(raw))] = value
                }
                _ = api.moveToElement(raw)
                return .start(name: name, namespace: namespace, attributes: attributes, empty: empty)
            case Int(SEGGET_XML_NODE_END_ELEMENT):
                return .end(name: string(api.localName(raw)), namespace: string(api.namespaceURI(raw)))
            case Int(SEGGET_XML_NODE_TEXT), Int(SEGGET_XML_NODE_CDATA):
                let value = string(api.value(raw))
                if value.utf8.count > limits.textBytes {
                    throw MetalinkError("a text of the Metalink is longer than \(limits.textBytes) bytes (line \(line)).")
                }
                return .text(value)
            case Int(SEGGET_XML_NODE_DOCUMENT_TYPE):
                throw MetalinkError("the Metalink has a document type declaration (<!DOCTYPE>), which a Metalink never needs; segget refuses it rather than expand or fetch entities.")
            case Int(SEGGET_XML_NODE_ENTITY_REFERENCE):
                throw MetalinkError("the Metalink refers to an entity (line \(line)); segget expands none.")
            default:
                continue
            }
        }
    }

    private func string(_ p: UnsafePointer<UInt8>?) -> String {
        guard let p else { return "" }
        return String(cString: p)
    }
}
