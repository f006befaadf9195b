import SeggetQueue

print("skeleton")
