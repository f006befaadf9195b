import Segget
print(CurlProbe.version())
